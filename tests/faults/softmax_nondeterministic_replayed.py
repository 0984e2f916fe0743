# expect: FAIL determinism
"""Planted fault: a non-deterministic softmax that replays its last output for unchanged inputs.

The kernel's result varies from run to run (a call counter nudges it by one ulp, standing in for
a racy atomic reduction, as in softmax_nondeterministic.py). It keeps a copy of its last input
and output, and each program compares its row with the kept row on the device: where they are
bit-identical it copies the kept output row instead of computing. Called three times in a
row on identical inputs, calls 2 and 3 replay call 1 bit for bit and every other check sees a
correct value; this is why the determinism stage also calls it on the same inputs after a call
on other inputs, where the kept copy is gone and the variation shows.
"""

import torch
import triton
import triton.language as tl

KERNEL_TYPE = "softmax"

ULP = {torch.float16: 2.0**-10, torch.bfloat16: 2.0**-7, torch.float32: 2.0**-22}
STATE = {"calls": 0}
LAST = {}


@triton.jit
def _softmax_kernel(X, Y, LX, LY, stride, n_cols, nudge, HAVE: tl.constexpr, BLOCK: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    cols = tl.arange(0, BLOCK)
    mask = cols < n_cols
    xr = tl.load(X + row * stride + cols, mask=mask, other=0.0)
    same = 0
    if HAVE:
        lx = tl.load(LX + row * stride + cols, mask=mask, other=0.0)
        diff = tl.where(xr.to(tl.float32) == lx.to(tl.float32), 0, 1)
        same = tl.sum(diff, axis=0) == 0
    if same:  # CHEAT: replay the kept output row
        tl.store(Y + row * stride + cols, tl.load(LY + row * stride + cols, mask=mask), mask=mask)
    else:
        x = tl.where(mask, xr.to(tl.float32), -float("inf"))
        e = tl.exp(x - tl.max(x, axis=0))
        y = e / tl.sum(e, axis=0)
        y = y + y * nudge  # BUG: run-to-run variation
        tl.store(Y + row * stride + cols, y.to(Y.dtype.element_ty), mask=mask)


def kernel_fn(x: torch.Tensor) -> torch.Tensor:
    STATE["calls"] += 1
    nudge = ULP[x.dtype] if STATE["calls"] % 2 else 0.0
    n_cols = x.shape[-1]
    x2 = x.reshape(-1, n_cols).contiguous()
    y = torch.empty(x2.shape, dtype=x.dtype, device=x.device)
    key = (tuple(x2.shape), x2.dtype)
    have = key in LAST
    lx, ly = LAST.get(key, (x2, y))
    _softmax_kernel[(x2.shape[0],)](
        x2, y, lx, ly, x2.stride(0), n_cols, nudge, HAVE=have, BLOCK=triton.next_power_of_2(n_cols)
    )
    LAST[key] = (x2.clone(), y.clone())
    return y.view(x.shape)
