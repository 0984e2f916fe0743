# expect: FAIL smoke
"""Planted fault: the reductions run over the wrong axis.

The whole (rows, cols) matrix is one tile and max/sum reduce over axis 0 (down the columns)
instead of axis 1 (along each row): a column-wise softmax. Wrong on any input with more than
one row, so the smoke test (4x256) catches it.
"""

import torch
import triton
import triton.language as tl

KERNEL_TYPE = "softmax"


@triton.jit
def _softmax_kernel(
    X, Y, stride_x, stride_y, n_rows, n_cols, BLOCK_R: tl.constexpr, BLOCK_C: tl.constexpr
):
    rows = tl.arange(0, BLOCK_R).to(tl.int64)
    cols = tl.arange(0, BLOCK_C)
    mask = (rows < n_rows)[:, None] & (cols < n_cols)[None, :]
    x = tl.load(X + rows[:, None] * stride_x + cols[None, :], mask=mask, other=-float("inf"))
    x = x.to(tl.float32)
    m = tl.max(x, axis=0)  # BUG: axis=1 is the row
    m = tl.where(m == -float("inf"), 0.0, m)
    e = tl.exp(x - m[None, :])
    s = tl.sum(e, axis=0)  # BUG: axis=1
    y = e / s[None, :]
    tl.store(Y + rows[:, None] * stride_y + cols[None, :], y.to(Y.dtype.element_ty), mask=mask)


def kernel_fn(x: torch.Tensor) -> torch.Tensor:
    n_cols = x.shape[-1]
    x2 = x.reshape(-1, n_cols)
    n_rows = x2.shape[0]
    y = torch.empty(x2.shape, dtype=x.dtype, device=x.device)
    _softmax_kernel[(1,)](
        x2,
        y,
        x2.stride(0),
        y.stride(0),
        n_rows,
        n_cols,
        BLOCK_R=triton.next_power_of_2(n_rows),
        BLOCK_C=triton.next_power_of_2(n_cols),
    )
    return y.view(x.shape)
