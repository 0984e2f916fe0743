# expect: FAIL sweep
"""Planted fault (unwritten output): 4 rows per program, but the grid is n_rows // 4 (floor)
instead of cdiv(n_rows, 4).

When the row count is a multiple of 4 (the smoke input has 4 rows) everything is written; in the
sweep's single-row input no program runs at all and the output keeps whatever torch.empty held
(the harness poisons that memory with NaN first, so the unwritten elements read back as NaN).
"""

import torch
import triton
import triton.language as tl

KERNEL_TYPE = "rmsnorm"
ROWS = 4


@triton.jit
def _rmsnorm_kernel(
    X, W, Y, stride_x, stride_y, n_rows, n_cols, eps, ROWS: tl.constexpr, BLOCK: tl.constexpr
):
    rows = tl.program_id(0).to(tl.int64) * ROWS + tl.arange(0, ROWS)
    cols = tl.arange(0, BLOCK)
    mask = (rows < n_rows)[:, None] & (cols < n_cols)[None, :]
    x = tl.load(X + rows[:, None] * stride_x + cols[None, :], mask=mask, other=0.0)
    x = x.to(tl.float32)
    w = tl.load(W + cols, mask=cols < n_cols, other=0.0).to(tl.float32)
    rstd = tl.rsqrt(tl.sum(x * x, axis=1) / n_cols + eps)
    y = x * rstd[:, None] * w[None, :]
    tl.store(Y + rows[:, None] * stride_y + cols[None, :], y.to(Y.dtype.element_ty), mask=mask)


def kernel_fn(x: torch.Tensor, weight: torch.Tensor, eps: float = 1e-6) -> torch.Tensor:
    n_cols = x.shape[-1]
    x2 = x.reshape(-1, n_cols)
    n_rows = x2.shape[0]
    y = torch.empty(x2.shape, dtype=x.dtype, device=x.device)
    grid = (n_rows // ROWS,)  # BUG: drops the last n_rows % ROWS rows
    _rmsnorm_kernel[grid](
        x2,
        weight,
        y,
        x2.stride(0),
        y.stride(0),
        n_rows,
        n_cols,
        eps,
        ROWS=ROWS,
        BLOCK=triton.next_power_of_2(n_cols),
    )
    return y.view(x.shape)
