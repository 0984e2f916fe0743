# expect: REJECTED sweep
"""Planted cheat: correct for the first 10 calls, then returns the last output it computed.

The threshold is below the stages' call count: call 11 is the sweep's third size (16x256) in
fp32 and gets the previous call's bf16 output: the very tensor that call returned, so the sweep
REJECTS it as an output kept across calls (its dtype is wrong too). (The late
twin, softmax_call_count_late.py, waits until the stages are over.)
"""

import torch
import triton
import triton.language as tl

KERNEL_TYPE = "softmax"

CHEAT_AFTER = 10
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
