# expect: FAIL sweep
"""Planted fault: the target range check is `target < n_cols - 1` (off by one).

Rows whose target is the last class (vocab - 1) take their target logit as 0 instead of
reading it. Random targets hit the last class with probability 1/vocab per row, so the first
check to show it depends on the seed (with the test's fixed seed, a sweep size; the adversarial
extreme_targets case puts vocab - 1 in every third row in any case).
"""

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
    in_range = active & (target >= 0) & (target < n_cols - 1)  # BUG: target < n_cols
    x_t = tl.load(X + row * stride_x + target, mask=in_range, other=0.0).to(tl.float32)
    loss = shift + tl.log(tl.where(active, s, 1.0)) - x_t
    tl.store(L + row, tl.where(active, loss, 0.0))


@triton.jit
def _mean_kernel(L, T, Out, n_rows, IGNORE: tl.constexpr, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    total = tl.zeros([BLOCK], tl.float32)
    count = tl.zeros([BLOCK], tl.float32)
    for start in range(0, n_rows, BLOCK):
        mask = start + offs < n_rows
        total += tl.load(L + start + offs, mask=mask, other=0.0)
        target = tl.load(T + start + offs, mask=mask, other=IGNORE)
        count += (target != IGNORE).to(tl.float32)
    tl.store(Out, tl.sum(total, axis=0) / tl.sum(count, axis=0))


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
    _mean_kernel[(1,)](row_loss, targets, out, n_rows, IGNORE=IGNORE_INDEX, BLOCK=256)
    return out
