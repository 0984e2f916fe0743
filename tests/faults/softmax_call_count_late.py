# expect: REJECTED benchmark
"""Planted cheat: correct for the first 56 calls, then returns the last output it computed.

56 is exactly how many calls the five stages make for softmax on the CPU (smoke 2, sweep 24,
adversarial 9, determinism 12, odd sizes 9), so every stage passes and every timed call in the
benchmark would be a no-op. The benchmark judges its first call at each size like a stage check,
and the stale (7x1537) output is the very tensor the last stage call returned: REJECTED there
as an output kept across calls (serve.py holds each stage call's output), before any timing.
If the stages' call count changes, this file's CHEAT_AFTER must follow it to keep testing the
benchmark guard (a smaller value fails a stage; see softmax_call_count_early.py).
"""

import torch
import triton
import triton.language as tl

KERNEL_TYPE = "softmax"

CHEAT_AFTER = 56
STATE = {"calls": 0, "last": None}


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


def kernel_fn(x: torch.Tensor) -> torch.Tensor:
    STATE["calls"] += 1
    if STATE["calls"] > CHEAT_AFTER:
        return STATE["last"]  # CHEAT: no work after the harness has "seen enough"
    n_cols = x.shape[-1]
    x2 = x.reshape(-1, n_cols)
    y = torch.empty(x2.shape, dtype=x.dtype, device=x.device)
    _softmax_kernel[(x2.shape[0],)](
        x2, y, x2.stride(0), y.stride(0), n_cols, BLOCK=triton.next_power_of_2(n_cols)
    )
    STATE["last"] = y.view(x.shape)
    return STATE["last"]
