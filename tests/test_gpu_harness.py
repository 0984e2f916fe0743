"""GPU-only checks (skipped without CUDA; run on the GPU machine): the starters pass at
LLM-scale sizes, a side-stream cheat is caught by each layer, and the measured ceilings are sane."""

from __future__ import annotations

from pathlib import Path

import pytest

from autokernel.harness.sandbox import Options, evaluate
from autokernel.harness.verdict import Status
from autokernel.specs import SPECS

pytestmark = pytest.mark.gpu
KERNELS = Path(__file__).parents[1] / "kernels"

SIDE_STREAM = """
import torch
import triton
import triton.language as tl
KERNEL_TYPE = "reduce"


@triton.jit
def _sum(X, Y, n, BLOCK: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    acc = tl.zeros([BLOCK], dtype=tl.float32)
    for start in range(0, n, BLOCK):
        offs = start + tl.arange(0, BLOCK)
        acc += tl.load(X + row * n + offs, mask=offs < n, other=0.0).to(tl.float32)
    tl.store(Y + row, tl.sum(acc, axis=0).to(Y.dtype.element_ty))


SIDE = torch.cuda.Stream()


def kernel_fn(x):
    x2 = x.reshape(-1, x.shape[-1])
    y = torch.empty(x2.shape[0], dtype=x.dtype, device=x.device)
    SIDE.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(SIDE):
        _sum[(x2.shape[0],)](x2, y, x2.shape[1], BLOCK=1024)
    return y.view(x.shape[:-1])
"""


@pytest.mark.parametrize("name", SPECS)
def test_starter_passes_on_gpu(name):
    v = evaluate(KERNELS / f"{name}.py", Options(timing=False, seed=11))
    assert v.status is Status.PASS, f"{v.message}\n{v.stderr_tail}"
    assert not v.interpreter


@pytest.mark.parametrize("name", SPECS)
def test_reference_passes_at_gpu_sizes(name, tmp_path):
    """No false failures at the GPU sizes either: reference.py itself, as a kernel, passes."""
    path = tmp_path / "kernel.py"
    path.write_text(
        f"import reference\nKERNEL_TYPE = {name!r}\n\n\ndef kernel_fn(*a):\n"
        f"    return reference.{name}(*a)\n"
    )
    v = evaluate(path, Options(timing=False, guards=False, seed=5))
    assert v.status is Status.PASS, f"{v.message}\n{v.stderr_tail}"


def test_side_stream_is_rejected_statically(tmp_path):
    path = tmp_path / "kernel.py"
    path.write_text(SIDE_STREAM)
    v = evaluate(path, Options(compile_baseline=False))
    assert v.status is Status.REJECTED and v.failure.stage == "static"


def test_side_stream_is_caught_at_run_time_when_static_check_is_bypassed(tmp_path):
    path = tmp_path / "kernel.py"
    path.write_text(SIDE_STREAM)
    v = evaluate(path, Options(compile_baseline=False, guards=False))
    assert v.status is Status.REJECTED, v.message
    assert "stream" in v.message


def test_measured_ceilings_are_plausible():
    from autokernel import gpu

    c = gpu.load_or_measure()
    spec = gpu.detect()
    assert c is not None and spec is not None
    assert 0.3 * spec.mem_bandwidth_gbs < c.copy_gbs < 1.05 * spec.mem_bandwidth_gbs
    assert 0.3 * spec.bf16_tflops < c.matmul_tflops_bf16 < 1.05 * spec.bf16_tflops


def test_interleaved_compare_of_two_honest_kernels_on_gpu(tmp_path):
    """The keep rule's tie-breaker must work on a GPU: the harness's own timing code may create
    streams, which the stream guard must not blame on the kernels (it did, on the H200)."""
    from autokernel.harness.sandbox import compare

    best, cand = tmp_path / "best.py", tmp_path / "cand.py"
    source = (KERNELS / "softmax.py").read_text()
    best.write_text(source)
    cand.write_text(source)
    result = compare(best, cand, Options(quick=True, seed=3), rounds=3)
    assert result.error is None, result.error
    assert 0.9 < result.ratio < 1.1 and result.sizes
