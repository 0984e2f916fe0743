# expect: FAIL smoke
"""Planted fault: returns the sum of the row losses instead of their mean over counted rows."""

import torch
import triton
import triton.language as tl

KERNEL_TYPE = "cross_entropy"
IGNORE_INDEX = -100


@triton.jit
def _row_loss_kernel(X, T, L, stride_x, n_cols, IGNORE: tl.constexpr, BLOCK: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    cols = tl.arange(0, BLOCK)
    target = tl.load(T + row)
    active = target != IGNORE
    x = tl.load(X + row * stride_x + cols, mask=(cols < n_cols) & active, other=-float("inf"))
    x = x.to(tl.float32)
    m = tl.max(x, axis=0)
    shift = tl.where(m == -float("inf"), 0.0, m)
    s = tl.sum(tl.exp(x - shift), axis=0)
    in_range = active & (target >= 0) & (target < n_cols)
    x_t = tl.load(X + row * stride_x + target, mask=in_range, other=0.0).to(tl.float32)
    loss = shift + tl.log(tl.where(active, s, 1.0)) - x_t
    tl.store(L + row, tl.where(active, loss, 0.0))


@triton.jit
def _sum_kernel(L, Out, n_rows, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    total = tl.zeros([BLOCK], tl.float32)
    for start in range(0, n_rows, BLOCK):
        total += tl.load(L + start + offs, mask=start + offs < n_rows, other=0.0)
    tl.store(Out, tl.sum(total, axis=0))  # BUG: not divided by the number of counted rows


def kernel_fn(logits: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
    n_rows, n_cols = logits.shape
    out = torch.empty((), dtype=torch.float32, device=logits.device)
    row_loss = torch.empty((n_rows,), dtype=torch.float32, device=logits.device)
    _row_loss_kernel[(n_rows,)](
        logits,
        targets,
        row_loss,
        logits.stride(0),
        n_cols,
        IGNORE=IGNORE_INDEX,
        BLOCK=triton.next_power_of_2(n_cols),
    )
    _sum_kernel[(1,)](row_loss, out, n_rows, BLOCK=256)
    return out
