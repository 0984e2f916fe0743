"""The CUDA starters (kernels/cuda/*.py) on a CPU machine: each passes both guards, names only
kernels its source defines, keeps CONFIG inside SEARCH_SPACE, and compiles with nvcc for sm_90a
(device code only, as the builder compiles it), so a broken starter cannot land."""

from __future__ import annotations

import ast
import itertools
import re
import subprocess
from pathlib import Path

import pytest
from cuda_helpers import nvcc_or_skip

from autokernel import cuda_build
from autokernel.harness.cuda_source import entry_points, tokenize
from autokernel.harness.guards import check_source, literal_assignment
from autokernel.harness.sandbox import NO_GPU, Options, evaluate
from autokernel.harness.verdict import Status

ROOT = Path(__file__).resolve().parents[1]
STARTERS = sorted((ROOT / "kernels" / "cuda").glob("[a-z]*.py"))
IDS = [p.stem for p in STARTERS]
ARCH = "sm_90a"  # the H200's; the CPU compile proves the source builds for it


def _literals(path: Path) -> tuple[str, dict, dict]:
    text = path.read_text()
    return (literal_assignment(text, "CUDA_SOURCE"), literal_assignment(text, "CONFIG"),
            literal_assignment(text, "SEARCH_SPACE"))  # fmt: skip


def _compile(source: str, config: dict) -> bytes:
    flags = [*cuda_build.BASE_FLAGS, f"-arch={ARCH}", *cuda_build.define_flags(config)]
    return cuda_build.compile_cubin(source, nvcc_or_skip(), flags)


def test_the_seven_cuda_starters_are_there():
    assert set(IDS) == {"rmsnorm", "layernorm", "softmax", "cross_entropy", "reduce",
                        "rotary_embedding", "matmul"}  # fmt: skip


@pytest.mark.parametrize("path", STARTERS, ids=IDS)
def test_starter_contract(path):
    text = path.read_text()
    assert check_source(text) == []
    assert literal_assignment(text, "BACKEND") == "cuda"
    assert literal_assignment(text, "KERNEL_TYPE") == path.stem
    source, config, space = _literals(path)
    assert set(config) == set(space), "every tunable in both CONFIG and SEARCH_SPACE"
    assert all(config[k] in space[k] for k in config)
    defined = {e.name for e in entry_points(tokenize(source))}
    used = {
        n.attr
        for n in ast.walk(ast.parse(text))
        if isinstance(n, ast.Attribute) and isinstance(n.value, ast.Name) and n.value.id == "_MOD"
    }
    assert used and used <= defined, f"kernels used but not defined: {used - defined}"


@pytest.mark.parametrize("path", STARTERS, ids=IDS)
def test_starter_compiles_for_sm90a(path):
    source, config, _ = _literals(path)
    assert len(_compile(source, config)) > 0


@pytest.mark.slow
@pytest.mark.parametrize("path", STARTERS, ids=IDS)
def test_starter_compiles_at_the_corners_of_its_search_space(path):
    """The tuner may pick any combination: the smallest and the largest value of every key
    together must build too (a template bound or a shared-memory size out of range shows)."""
    source, config, space = _literals(path)
    for pick in (min, max):
        corner = {k: pick(v) if all(isinstance(x, int) for x in v) else v[0]
                  for k, v in space.items()}  # fmt: skip
        if corner != config:
            _compile(source, corner)


@pytest.mark.parametrize("path", STARTERS[:1], ids=IDS[:1])
def test_cuda_kernel_without_a_gpu_is_a_fail_with_one_clear_line(path):
    verdict = evaluate(path, Options(prestart=False, force_cpu=True))
    assert verdict.status is Status.FAIL, verdict.message
    assert verdict.message == f"FAIL in smoke: {NO_GPU}"
    assert [s.status for s in verdict.stages] == ["FAIL", *itertools.repeat("SKIPPED", 4)]


def test_cuda_source_refused_by_the_guard_is_rejected_statically(tmp_path):
    path = tmp_path / "kernel.py"
    path.write_text(
        'KERNEL_TYPE = "reduce"\nBACKEND = "cuda"\n'
        "CUDA_SOURCE = r'''\nextern \"C\" __global__ void k() { asm(\"trap;\"); }\n'''\n"
        "def kernel_fn(x):\n    return x\n"
    )
    verdict = evaluate(path, Options(prestart=False))
    assert verdict.status is Status.REJECTED and verdict.failure.stage == "static"
    assert "CUDA_SOURCE line 2" in verdict.message and "trap" in verdict.message


def test_cuda_kernel_without_a_source_literal_is_rejected(tmp_path):
    path = tmp_path / "kernel.py"
    path.write_text('KERNEL_TYPE = "reduce"\nBACKEND = "cuda"\nCUDA_SOURCE = "a" + "b"\n'
                    "def kernel_fn(x):\n    return x\n")  # fmt: skip
    verdict = evaluate(path, Options(prestart=False))
    assert verdict.status is Status.REJECTED and "string literal" in verdict.message


ROW_STARTERS = ("rmsnorm", "layernorm", "softmax", "reduce", "cross_entropy")
WRITES_ROWS = ("rmsnorm", "layernorm", "softmax")


def _nvcc(source: str, config: dict, tmp_path: Path, *flags: str) -> tuple[str, Path]:
    """nvcc's report and output path for the source at config, with extra flags."""
    src = tmp_path / "k.cu"
    src.write_text(source)
    out = tmp_path / "k.out"
    argv = [nvcc_or_skip(), *cuda_build.BASE_FLAGS, f"-arch={ARCH}",
            *cuda_build.define_flags(config), *flags, "-o", str(out), str(src)]  # fmt: skip
    done = subprocess.run(argv, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-2000:]
    return done.stdout + done.stderr, out


@pytest.mark.slow
@pytest.mark.parametrize("kind", ROW_STARTERS)
def test_row_starters_move_16_byte_vectors_without_spilling(kind, tmp_path):
    """At its CONFIG each row-wise starter loads (and stores) rows as 128-bit accesses and keeps
    every value in registers: a struct of bf16 copied element by element, or a register array
    indexed at run time, shows here before it costs 3x on the GPU."""
    source, config, _ = _literals(ROOT / "kernels" / "cuda" / f"{kind}.py")
    # one build gives both: ptxas's report and, kept, the PTX it assembled (a second nvcc run
    # for -ptx cost 10-20 s a starter on two cores)
    keep = tmp_path / "keep"
    keep.mkdir()
    report, _ = _nvcc(source, config, tmp_path, "-Xptxas", "-v", "-keep", f"-keep-dir={keep}")
    spills = re.findall(r"(\d+) bytes spill stores, (\d+) bytes spill loads", report)
    assert spills and all(s == ("0", "0") for s in spills), report
    (ptx,) = keep.glob("*.ptx")
    text = ptx.read_text()
    assert "ld.global.nc.v4.u32" in text
    if kind in WRITES_ROWS:
        assert "st.global.v4.u32" in text
