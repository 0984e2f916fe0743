# expect: FAIL smoke
"""Planted fault: the sum is right but returned with a kept last dim, (rows, 1) instead of (rows,)."""

import torch
import triton
import triton.language as tl

KERNEL_TYPE = "reduce"


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
    y = torch.empty((*x.shape[:-1], 1), dtype=x.dtype, device=x.device)  # BUG: keepdim
    _reduce_kernel[(x2.shape[0],)](x2, y, x2.stride(0), n_cols, BLOCK=1024)
    return y
