# expect: FAIL determinism
"""Planted fault: the output depends on a module-level call counter.

Every other call nudges the result by one unit in the last place of the output dtype (via a
kernel argument), standing in for a racy atomic reduction whose order changes between runs.
The nudge is well inside every tolerance, so smoke, sweep and adversarial pass; the
determinism stage runs identical inputs three times and compares the bits.
"""

import torch
import triton
import triton.language as tl

KERNEL_TYPE = "softmax"

# Relative size of one unit in the last place, per output dtype.
ULP = {torch.float16: 2.0**-10, torch.bfloat16: 2.0**-7, torch.float32: 2.0**-22}
STATE = {"calls": 0}


@triton.jit
def _softmax_kernel(X, Y, stride_x, stride_y, n_cols, nudge, BLOCK: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    cols = tl.arange(0, BLOCK)
    mask = cols < n_cols
    x = tl.load(X + row * stride_x + cols, mask=mask, other=-float("inf")).to(tl.float32)
    m = tl.max(x, axis=0)
    e = tl.exp(x - m)
    y = e / tl.sum(e, axis=0)
    y = y + y * nudge  # BUG: run-to-run variation
    tl.store(Y + row * stride_y + cols, y.to(Y.dtype.element_ty), mask=mask)


def kernel_fn(x: torch.Tensor) -> torch.Tensor:
    STATE["calls"] += 1
    nudge = ULP[x.dtype] if STATE["calls"] % 2 else 0.0
    n_cols = x.shape[-1]
    x2 = x.reshape(-1, n_cols)
    y = torch.empty(x2.shape, dtype=x.dtype, device=x.device)
    _softmax_kernel[(x2.shape[0],)](
        x2, y, x2.stride(0), y.stride(0), n_cols, nudge, BLOCK=triton.next_power_of_2(n_cols)
    )
    return y.view(x.shape)
