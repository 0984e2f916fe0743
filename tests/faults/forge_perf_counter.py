# expect: REJECTED benchmark guards-off
"""Planted forgery: a correct kernel in a process whose clocks run a thousand times slow
(guards off: the static guard forbids time; this tests the judge).

time.perf_counter, time.perf_counter_ns and time.monotonic are replaced in the candidate's
process, so every figure it measures (median, fresh-data calls, wall time) is 1000x too small
and all of them agree with each other. Caught because the judge's clock is in another process:
its wall time for a batch of calls is about 1000x the claimed median.
"""

import time

import torch
import triton
import triton.language as tl

KERNEL_TYPE = "reduce"

_real = time.perf_counter
_start = _real()
time.perf_counter = lambda: _start + (_real() - _start) / 1000.0  # CHEAT: a slow clock
time.monotonic = time.perf_counter


@triton.jit
def _reduce_kernel(X, Y, stride_x, n_cols, BLOCK: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    cols = tl.arange(0, BLOCK)
    acc = tl.zeros([BLOCK], tl.float32)
    for start in range(0, n_cols, BLOCK):
        x = tl.load(X + row * stride_x + start + cols, mask=start + cols < n_cols, other=0.0)
        acc += x.to(tl.float32)
    tl.store(Y + row, tl.sum(acc, axis=0).to(Y.dtype.element_ty))


def kernel_fn(x: torch.Tensor) -> torch.Tensor:
    n_cols = x.shape[-1]
    x2 = x.reshape(-1, n_cols)
    y = torch.empty(x.shape[:-1], dtype=x.dtype, device=x.device)
    _reduce_kernel[(x2.shape[0],)](x2, y, x2.stride(0), n_cols, BLOCK=1024)
    return y
