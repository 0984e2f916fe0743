"""Batched products (torch.bmm, baddbmm, a @ b with batch dims on both sides) as the matmul
type's one 2-D problem, where that is exact; else why not, in words profile and verify print.

The matmul kernel takes A (M, K) and B (K, N). A batched product folds into that exactly when
one operand is the same matrix across the whole (broadcast) batch:

- the right one (batch dims of size 1 or expanded with stride 0, a batch of 1 included): the
  left operand's rows are stacked into M, as a 3-D x @ W already is;
- the left one: the right operand's batches are laid side by side into N (a copy of the right
  operand and of the output, paid for the one launch; verify keeps it only if it is faster).

A product whose both operands differ per batch (attention scores q @ k.transpose(-1, -2),
torch.bmm of per-sample matrices) is G independent GEMMs: one launch of a (K, N) kernel cannot
compute it, and G launches of it lose to cuBLAS's one batched GEMM, so it stays with PyTorch
and the reason says so. Sameness is read from the strides (size 1 or stride 0), never from the
values: a per-call scan of the data would cost as much as the product.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

import torch

Finish = Callable[[torch.Tensor], torch.Tensor]  # the 2-D op output -> the product's result


@dataclass(frozen=True)
class Folded:
    """A batched product as one (M, K) @ (K, N) call, and how its output becomes the result."""

    a: torch.Tensor
    b: torch.Tensor
    finish: Finish


def _shared(t: torch.Tensor) -> bool:
    """Whether every batch of `t` (all dims but the last two) is one and the same matrix."""
    return all(
        size == 1 or stride == 0 for size, stride in zip(t.shape[:-2], t.stride()[:-2], strict=True)
    )


def _first(t: torch.Tensor) -> torch.Tensor:
    """The one matrix of a shared batch (a view)."""
    return t[(0,) * (t.dim() - 2)] if t.dim() > 2 else t


def _broadcast(out: torch.Tensor, batch: torch.Size) -> torch.Tensor:
    """`out` over the product's full batch, materialized as torch.matmul returns it."""
    full = (*batch, *out.shape[-2:])
    return out if out.shape == full else out.expand(full).contiguous()


def fold(a: torch.Tensor, b: torch.Tensor) -> Folded | str:
    """a @ b (torch.matmul's broadcasting, both operands at least 2-D) as one 2-D product, or
    why it is not one."""
    m, k = a.shape[-2:]
    n = b.shape[-1]
    if b.shape[-2] != k:
        return f"inner dims differ ({k} vs {b.shape[-2]})"
    try:
        batch = torch.broadcast_shapes(a.shape[:-2], b.shape[:-2])
    except RuntimeError:
        return "batch dims that do not broadcast"
    if math.prod(batch) == 0:
        return "an empty batch"
    if _shared(b):
        if _shared(a):  # both shared (a batch of 1): one product, broadcast
            a = _first(a)
        lead = a.shape[:-2]

        def rows(out: torch.Tensor) -> torch.Tensor:
            return _broadcast(out.reshape(*lead, m, n), batch)

        return Folded(a.reshape(-1, k), _first(b), rows)
    if _shared(a):
        lead = b.shape[:-2]
        g = math.prod(lead)

        def columns(out: torch.Tensor) -> torch.Tensor:
            per = out.reshape(m, g, n).transpose(0, 1).contiguous()
            return _broadcast(per.reshape(*lead, m, n), batch)

        # (*lead, K, N) -> (K, G * N): batch g's columns are g * N .. (g + 1) * N - 1
        side_by_side = b.reshape(g, k, n).transpose(0, 1).reshape(k, g * n)
        return Folded(_first(a), side_by_side, columns)
    return (
        f"both operands differ per batch ({math.prod(batch)} independent {m}x{k} @ {k}x{n} "
        "products); the matmul kernel takes one (K, N) right operand, so a batched product "
        "folds into one launch only where an operand is the same across the batch (size 1 "
        "or expanded): PyTorch's batched GEMM runs this one"
    )


def product_note(a: object, b: object) -> str | None:
    """Why a product of these operands is not a matmul target, before any folding."""
    if not isinstance(a, torch.Tensor) or not isinstance(b, torch.Tensor):
        return None
    if not (a.is_floating_point() and b.is_floating_point()):
        return None  # integer products: no kernel type computes them, nothing to explain
    if a.dim() < 2 or b.dim() < 2:
        return "a matrix-vector or vector product (a 1-D operand): the matmul kernel takes matrices"
    return None
