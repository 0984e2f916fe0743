# expect: FAIL sweep
"""Planted fault: targets equal to -100 (ignore_index) are treated as ordinary rows.

An ignored row's target logit is taken as 0 (its load is masked off as out of range) and the
row counts in the mean's denominator, so any input with an ignored row is wrong. About 5% of
rows are ignored in the spec's random targets; which check meets one first depends on the seed
(with the test's fixed seed, a sweep size; the adversarial extreme_targets case has one every
third row in any case).
"""

import torch
import triton
import triton.language as tl

KERNEL_TYPE = "cross_entropy"


@triton.jit
def _row_loss_kernel(X, T, L, stride_x, n_cols, BLOCK: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    cols = tl.arange(0, BLOCK)
    x = tl.load(X + row * stride_x + cols, mask=cols < n_cols, other=-float("inf"))
    x = x.to(tl.float32)
    m = tl.max(x, axis=0)
    lse = m + tl.log(tl.sum(tl.exp(x - m), axis=0))
    target = tl.load(T + row)
    in_range = (target >= 0) & (target < n_cols)
    x_t = tl.load(X + row * stride_x + target, mask=in_range, other=0.0).to(tl.float32)
    tl.store(L + row, lse - x_t)  # BUG: ignored rows (target == -100) are not zeroed


@triton.jit
def _mean_kernel(L, T, Out, n_rows, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    total = tl.zeros([BLOCK], tl.float32)
    count = tl.zeros([BLOCK], tl.float32)
    for start in range(0, n_rows, BLOCK):
        mask = start + offs < n_rows
        total += tl.load(L + start + offs, mask=mask, other=0.0)
        count += mask.to(tl.float32)  # BUG: counts ignored rows too
    tl.store(Out, tl.sum(total, axis=0) / tl.sum(count, axis=0))


def kernel_fn(logits: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
    n_rows, n_cols = logits.shape
    out = torch.empty((), dtype=torch.float32, device=logits.device)
    row_loss = torch.empty((n_rows,), dtype=torch.float32, device=logits.device)
    _row_loss_kernel[(n_rows,)](
        logits, targets, row_loss, logits.stride(0), n_cols, BLOCK=triton.next_power_of_2(n_cols)
    )
    _mean_kernel[(1,)](row_loss, targets, out, n_rows, BLOCK=256)
    return out
