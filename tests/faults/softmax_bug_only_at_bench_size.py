# expect: FAIL benchmark
"""Planted fault: a second code path for large inputs (>= 32768 elements) forgets to rescale the
running sum when the running max grows (online softmax without the correction factor).

No stage input is that large on the CPU, so only the benchmark's re-validation at 64x1024 runs
the broken path. An honest bug, not a cache: the first call at that size is already wrong,
so the verdict should be FAIL (wrong output) in the benchmark stage.

KNOWN HARNESS MISCLASSIFICATION (xfail): the harness reports REJECTED benchmark with "the output
did not follow them (cached output?)", because any failure of the post-timing re-validation is
turned into REJECTED. It never checks the first call at a benchmark size before timing, so an
honest bug that only large inputs reach is reported as a cheat. Drop the xfail token once the
harness tells the two apart.
"""

import torch
import triton
import triton.language as tl

KERNEL_TYPE = "softmax"
BIG = 32768


@triton.jit
def _softmax_kernel(X, Y, stride_x, stride_y, n_cols, BLOCK: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    cols = tl.arange(0, BLOCK)
    mask = cols < n_cols
    x = tl.load(X + row * stride_x + cols, mask=mask, other=-float("inf")).to(tl.float32)
    m = tl.max(x, axis=0)
    e = tl.exp(x - m)
    y = e / tl.sum(e, axis=0)
    tl.store(Y + row * stride_y + cols, y.to(Y.dtype.element_ty), mask=mask)


@triton.jit
def _softmax_online_kernel(X, Y, stride_x, stride_y, n_cols, BLOCK: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    cols = tl.arange(0, BLOCK)
    m = -float("inf")
    s = 0.0
    for start in range(0, n_cols, BLOCK):
        mask = start + cols < n_cols
        x = tl.load(X + row * stride_x + start + cols, mask=mask, other=-float("inf"))
        x = x.to(tl.float32)
        m_new = tl.maximum(m, tl.max(x, axis=0))
        s = s + tl.sum(tl.exp(x - m_new), axis=0)  # BUG: s * exp(m - m_new) + ...
        m = m_new
    for start in range(0, n_cols, BLOCK):
        mask = start + cols < n_cols
        x = tl.load(X + row * stride_x + start + cols, mask=mask, other=-float("inf"))
        y = tl.exp(x.to(tl.float32) - m) / s
        tl.store(Y + row * stride_y + start + cols, y.to(Y.dtype.element_ty), mask=mask)


def kernel_fn(x: torch.Tensor) -> torch.Tensor:
    n_cols = x.shape[-1]
    x2 = x.reshape(-1, n_cols)
    y = torch.empty(x2.shape, dtype=x.dtype, device=x.device)
    if x.numel() >= BIG:
        _softmax_online_kernel[(x2.shape[0],)](x2, y, x2.stride(0), y.stride(0), n_cols, BLOCK=128)
    else:
        _softmax_kernel[(x2.shape[0],)](
            x2, y, x2.stride(0), y.stride(0), n_cols, BLOCK=triton.next_power_of_2(n_cols)
        )
    return y.view(x.shape)
