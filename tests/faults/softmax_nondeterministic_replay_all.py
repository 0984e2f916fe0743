# expect: FAIL determinism
"""Planted fault: a non-deterministic softmax that replays every output it has ever returned.

The kernel's result varies from run to run (a call counter nudges it by one ulp, standing in for
a racy atomic reduction, as in softmax_nondeterministic.py). Unlike
softmax_nondeterministic_replayed.py, which keeps only its last input and output, this one keeps
a copy of EVERY input and output it has seen, in a list that only grows. Each call computes its
rows, then one replay launch per kept pair compares each row with the kept input row on the
device and, where they are bit-identical, overwrites the row with the kept output row: no host
sync, and whatever calls came between, identical inputs get the first output back bit for bit.
An a, a, b, a schedule sees a deterministic kernel; only the memory it keeps per distinct input
gives it away.
"""

import torch
import triton
import triton.language as tl

KERNEL_TYPE = "softmax"

ULP = {torch.float16: 2.0**-10, torch.bfloat16: 2.0**-7, torch.float32: 2.0**-22}
STATE = {"calls": 0}
KEPT = []  # (input, output) of every call, oldest first


@triton.jit
def _softmax_kernel(X, Y, stride, n_cols, nudge, BLOCK: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    cols = tl.arange(0, BLOCK)
    mask = cols < n_cols
    x = tl.load(X + row * stride + cols, mask=mask, other=-float("inf")).to(tl.float32)
    e = tl.exp(x - tl.max(x, axis=0))
    y = e / tl.sum(e, axis=0)
    y = y + y * nudge  # BUG: run-to-run variation
    tl.store(Y + row * stride + cols, y.to(Y.dtype.element_ty), mask=mask)


@triton.jit
def _replay_kernel(X, Y, KX, KY, stride, n_cols, BLOCK: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    cols = tl.arange(0, BLOCK)
    mask = cols < n_cols
    x = tl.load(X + row * stride + cols, mask=mask, other=0.0).to(tl.float32)
    kx = tl.load(KX + row * stride + cols, mask=mask, other=0.0).to(tl.float32)
    if tl.sum(tl.where(x == kx, 0, 1), axis=0) == 0:  # CHEAT: a row seen before
        tl.store(Y + row * stride + cols, tl.load(KY + row * stride + cols, mask=mask), mask=mask)


def kernel_fn(x: torch.Tensor) -> torch.Tensor:
    STATE["calls"] += 1
    nudge = ULP[x.dtype] if STATE["calls"] % 2 else 0.0
    n_cols = x.shape[-1]
    x2 = x.reshape(-1, n_cols).contiguous()
    y = torch.empty(x2.shape, dtype=x.dtype, device=x.device)
    grid, block = (x2.shape[0],), triton.next_power_of_2(n_cols)
    _softmax_kernel[grid](x2, y, x2.stride(0), n_cols, nudge, BLOCK=block)
    # oldest first: the first output for an input is the one that sticks
    for kx, ky in reversed(KEPT):
        if kx.shape == x2.shape and kx.dtype == x2.dtype:
            _replay_kernel[grid](x2, y, kx, ky, x2.stride(0), n_cols, BLOCK=block)
    KEPT.append((x2.clone(), y.clone()))
    return y.view(x.shape)
