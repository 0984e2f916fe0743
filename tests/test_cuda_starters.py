"""The CUDA starters (kernels/cuda/*.py) on a CPU machine: each passes both guards, names only
kernels its source defines, keeps CONFIG inside SEARCH_SPACE, and compiles with nvcc for sm_90a
(device code only, as the builder compiles it), so a broken starter cannot land."""

from __future__ import annotations

import ast
import fcntl
import hashlib
import itertools
import json
import os
import re
from pathlib import Path

import pytest
from cuda_helpers import nvcc_or_skip

from autokernel import cuda_build
from autokernel.cubin import device_global_bytes
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


@pytest.fixture(scope="session")
def builds(tmp_path_factory) -> Path:
    """Where each starter's build at its CONFIG is kept for the session: under xdist, the
    folder above every worker's own, so the workers share it."""
    root = tmp_path_factory.getbasetemp()
    return (root.parent if os.environ.get("PYTEST_XDIST_WORKER") else root) / "cuda-starters"


def _built(path: Path, folder: Path) -> tuple[bytes, str, str]:
    """The starter at its CONFIG built by the builder's compile_cubin with the builder's flags,
    plus -Xptxas -v (ptxas's report) and -keep (the PTX it assembled): its cubin, the report
    and the PTX. Built once per session under a lock, whichever test or xdist worker asks
    first: an nvcc run of a starter costs 2-10 s on two cores, and two tests need this one."""
    source, config, _ = _literals(path)
    nvcc = nvcc_or_skip()
    flags = [*cuda_build.BASE_FLAGS, f"-arch={ARCH}", *cuda_build.define_flags(config)]
    key = hashlib.sha256(json.dumps([source, flags, nvcc]).encode()).hexdigest()[:16]
    out = folder / f"{path.stem}-{key}"
    folder.mkdir(parents=True, exist_ok=True)
    with open(folder / f"{out.name}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not (out / "kernel.cubin").exists():
            keep = out / "keep"
            keep.mkdir(parents=True, exist_ok=True)
            report = out / "report.txt"
            # compile_cubin keeps nothing nvcc prints when it succeeds: a wrapper saves it
            wrapper = out / "nvcc"
            wrapper.write_text(f'#!/bin/sh\n"{nvcc}" "$@" > "{report}" 2>&1\nrc=$?\n'
                               f'cat "{report}"\nexit $rc\n')  # fmt: skip
            wrapper.chmod(0o755)
            extra = ["-Xptxas", "-v", "-keep", f"-keep-dir={keep}"]
            cubin = cuda_build.compile_cubin(source, str(wrapper), [*flags, *extra])
            (out / "kernel.cubin.tmp").write_bytes(cubin)
            (out / "kernel.cubin.tmp").rename(out / "kernel.cubin")
    (ptx,) = (out / "keep").glob("*.ptx")
    return (out / "kernel.cubin").read_bytes(), (out / "report.txt").read_text(), ptx.read_text()


@pytest.mark.parametrize("path", STARTERS, ids=IDS)
def test_starter_compiles_for_sm90a(path, builds):
    cubin, _, _ = _built(path, builds)
    assert len(cubin) > 0
    assert device_global_bytes(cubin) == 0  # the builder refuses module-level device state


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


@pytest.mark.slow
@pytest.mark.parametrize("kind", ROW_STARTERS)
def test_row_starters_move_16_byte_vectors_without_spilling(kind, builds):
    """At its CONFIG each row-wise starter loads (and stores) rows as 128-bit accesses and keeps
    every value in registers: a struct of bf16 copied element by element, or a register array
    indexed at run time, shows here before it costs 3x on the GPU."""
    # one build gives both: ptxas's report and, kept, the PTX it assembled (a second nvcc run
    # for -ptx cost 10-20 s a starter on two cores); test_starter_compiles_for_sm90a's build
    _, report, text = _built(ROOT / "kernels" / "cuda" / f"{kind}.py", builds)
    spills = re.findall(r"(\d+) bytes spill stores, (\d+) bytes spill loads", report)
    assert spills and all(s == ("0", "0") for s in spills), report
    assert "ld.global.nc.v4.u32" in text
    if kind in WRITES_ROWS:
        assert "st.global.v4.u32" in text
