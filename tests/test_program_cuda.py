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


_VECTORS = r"""
extern "C" __global__ void copy16(const uint4* x, uint4* y) {
  y[threadIdx.x] = __ldg(x + threadIdx.x);
}
"""


def test_uint4_moves_16_bytes_in_one_access(tmp_path):
    assert "`ld.global.nc.v4.u32`, `st.global.v4.u32`" in _section()
    ptx = tmp_path / "k.ptx"
    done = subprocess.run([nvcc_or_skip(), "-ptx", "-O3", "-arch=sm_90a", "-o", str(ptx), "-x",
                           "cu", "-"], input=_VECTORS, capture_output=True, text=True,
                          timeout=120)  # fmt: skip
    assert done.returncode == 0, done.stderr
    text = ptx.read_text()
    assert "ld.global.nc.v4.u32" in text and "st.global.v4.u32" in text


def test_launch_bounds_with_blocks_per_sm_cap_the_registers():
    """__launch_bounds__(T, 1024 / T) holds a register-hungry kernel to 64 a thread."""
    assert "`__launch_bounds__(T, 1024 / T)` caps a thread at 64 registers" in _section()
    source = r"""
extern "C" __global__ void __launch_bounds__(512, 2) k(const float4* x, float* y) {
  float4 r[24];
#pragma unroll
  for (int i = 0; i < 24; ++i) r[i] = x[threadIdx.x + i * 512];
  float s = 0.f;
#pragma unroll
  for (int i = 0; i < 24; ++i) s += r[i].x * r[i].y + r[i].z * r[i].w;
  y[threadIdx.x] = s;
}
"""
    done = _compiles(source, "sm_90a", "-cubin", "-Xptxas", "-v")
    assert done.returncode == 0, done.stderr
    used = [int(n) for n in re.findall(r"Used (\d+) registers", done.stdout + done.stderr)]
    assert used and max(used) <= 64
