"""program.md's CUDA section states facts of the toolchain and the guard: each is checked here
against the nvcc the builder uses (the nvidia-cuda-nvcc wheel in CI) and the guard's lists."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest
from cuda_helpers import nvcc_or_skip

from autokernel import cuda_build
from autokernel.harness import cuda_check
from autokernel.harness.cuda_source import entry_points, tokenize
from autokernel.harness.guards import check_source, literal_assignment

PROGRAM = Path(__file__).parents[1] / "program.md"


def _section() -> str:
    text = PROGRAM.read_text()
    start = text.index("## CUDA C++")
    return text[start : text.index("\n## ", start + 1)]


def _example() -> str:
    return re.search(r"```python\n(.*?)```", _section(), re.S).group(1)


def _compiles(source: str, arch: str, *flags: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [nvcc_or_skip(), *flags, f"-arch={arch}", "-o", "/dev/null", "-x", "cu", "-"],
        input=source, capture_output=True, text=True, timeout=120,
    )  # fmt: skip


def test_the_example_passes_both_guards_and_builds():
    example = _example()
    assert check_source(example) == []
    source = literal_assignment(example, "CUDA_SOURCE")
    assert cuda_check.check_cuda_source(source) == []
    assert [e.name for e in entry_points(tokenize(source))] == ["row_sum"]
    flags = cuda_build.define_flags(literal_assignment(example, "CONFIG"))
    assert _compiles(source, "sm_90a", "-cubin", *flags).returncode == 0


def test_the_stated_nvcc_version_and_flags_are_the_builders():
    version = cuda_build.nvcc_version(nvcc_or_skip())
    assert f"nvcc {'.'.join(version.split('.')[:2])}" in _section()
    for flag in ("-cubin", "-O3", "-std=c++17"):
        assert flag in cuda_build.BASE_FLAGS and flag in _section()


def test_the_header_and_ptx_lists_are_the_guards():
    section = " ".join(_section().split())
    headers = section[section.index("`#include` only of") : section.index("Inline `asm`")]
    named = set(re.findall(r"[\w/]+\.h\b|[\w/]+\.cuh\b|\b(?:cstdint|cfloat|climits|cstddef|"
                           r"type_traits|utility|limits)\b", headers))  # fmt: skip
    assert named == cuda_check.ALLOWED_HEADERS
    assert all(d in headers for d in cuda_check.ALLOWED_HEADER_DIRS)
    ptx = section[section.index("PTX from:") : section.index("(and `.reg`)")]
    assert set(ptx.removeprefix("PTX from:").split()) == cuda_check.PTX_ALLOWED


@pytest.mark.parametrize(
    "ptx", ["wgmma.fence.sync.aligned;", "setmaxnreg.inc.sync.aligned.u32 240;"]
)
def test_wgmma_and_setmaxnreg_need_sm90a_not_sm90(ptx):
    source = f'extern "C" __global__ void k() {{ asm volatile("{ptx}\\n" ::); }}'
    assert _compiles(source, "sm_90a", "-cubin").returncode == 0
    failed = _compiles(source, "sm_90", "-cubin")
    assert failed.returncode != 0 and "not supported on .target 'sm_90'" in failed.stderr


def test_expf_is_exact_and_the_intrinsic_is_ex2_approx(tmp_path):
    """__expf is one ex2.approx of x * log2(e); expf first splits x with FMAs (3 with nvcc 13.0)
    so that the rounding stays within the accurate function's bound."""
    counts = {}
    for fn in ("__expf", "expf"):
        out = tmp_path / f"{fn}.ptx"
        done = subprocess.run(
            [nvcc_or_skip(), "--ptx", "-arch=sm_90a", "-O3", "-o", str(out), "-x", "cu", "-"],
            input=f'extern "C" __global__ void k(float* y) {{ y[0] = {fn}(y[1]); }}',
            capture_output=True, text=True, timeout=120,
        )  # fmt: skip
        assert done.returncode == 0, done.stderr
        ptx = out.read_text()
        counts[fn] = (ptx.count("ex2.approx"), ptx.count("fma.rn"))
    assert counts["__expf"] == (1, 0)
    assert counts["expf"][0] == 1 and counts["expf"][1] >= 2
