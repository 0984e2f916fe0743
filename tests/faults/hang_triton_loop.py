# expect: TIMEOUT smoke timeout=8
"""Planted fault: the Triton kernel's column loop never advances (the step is added to a copy),
so it spins forever: on a GPU a hung kernel, under the interpreter a Python loop that never ends.

The sandbox kills the process group at the limit and reports a TIMEOUT in the smoke phase.
"""

import torch
import triton
import triton.language as tl

KERNEL_TYPE = "reduce"


@triton.jit
def _reduce_kernel(X, Y, stride_x, n_cols, BLOCK: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    cols = tl.arange(0, BLOCK)
    acc = tl.zeros([BLOCK], tl.float32)
    start = 0
    while start < n_cols:
        x = tl.load(X + row * stride_x + start + cols, mask=start + cols < n_cols, other=0.0)
        acc += x.to(tl.float32)
        nxt = start + BLOCK  # BUG: `start = nxt` was forgotten
    tl.store(Y + row, tl.sum(acc, axis=0).to(Y.dtype.element_ty))


def kernel_fn(x: torch.Tensor) -> torch.Tensor:
    n_cols = x.shape[-1]
    x2 = x.reshape(-1, n_cols)
    y = torch.empty(x.shape[:-1], dtype=x.dtype, device=x.device)
    _reduce_kernel[(x2.shape[0],)](x2, y, x2.stride(0), n_cols, BLOCK=64)
    return y
