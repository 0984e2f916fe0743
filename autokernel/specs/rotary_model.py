"""The model side of rotary_embedding: a model function that rotates (B, H, S, D) tensors by
(S, D) cos/sin tables, fn(x, cos, sin) -> x or Hugging Face's fn(q, k, cos, sin, ...) -> (q, k),
probed once against reference.py whatever its name."""

from __future__ import annotations

import functools
import inspect
import types
from collections.abc import Callable, Sequence

import torch

from autokernel import reference
from autokernel.specs.model_side import (
    Claim,
    ModelSide,
    Probe,
    Size,
    dense_contract,
    floating,
    like,
)


@functools.lru_cache(maxsize=1024)
def n_required(fn: Callable) -> int:
    """Required positional parameters; cached, since inspect.signature per call cost more
    than the rest of the claim (a model calls its rotary function once per layer)."""
    params = inspect.signature(fn).parameters.values()
    return sum(p.default is p.empty and p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)
               for p in params)  # fmt: skip


def _may_claim(fn: types.FunctionType) -> bool:
    """Only a function taking x, cos, sin (or q, k, cos, sin) positionally can be rotary."""
    try:
        return n_required(fn) >= 3
    except (TypeError, ValueError):
        return False


def _table(t: object, x: torch.Tensor) -> torch.Tensor | None:
    if not isinstance(t, torch.Tensor) or x.dim() != 4 or t.shape[-2:] != x.shape[-2:]:
        return None
    return t.reshape(x.shape[-2:]) if all(n == 1 for n in t.shape[:-2]) else None


def _run(fn: Callable, pair: bool) -> tuple[torch.Tensor, torch.Tensor]:
    gen = torch.Generator().manual_seed(0)
    x = torch.randn(1, 2, 3, 8, generator=gen)
    freqs = torch.randn(3, 4, generator=gen)
    cos, sin = torch.cat((freqs, freqs), -1).cos(), torch.cat((freqs, freqs), -1).sin()
    want = reference.rotary_embedding(x, cos, sin)
    if pair:
        return fn(x, x, cos[None], sin[None])[1], want
    return fn(x, cos, sin), want


def _function(fn: types.FunctionType, args: tuple, kwargs: dict, probe: Probe) -> Claim | None:
    if kwargs or len(args) < 3 or not all(isinstance(a, torch.Tensor) for a in args[:3]):
        return None
    try:
        pair = n_required(fn) >= 4
    except (TypeError, ValueError):
        return None
    xs, tables = (args[:2], args[2:4]) if pair else (args[:1], args[1:3])
    if len(tables) != 2 or len(args) != len(xs) + 2 or not floating(*xs, *tables):
        return None
    cs = [_table(t, xs[0]) for t in tables]
    if any(c is None for c in cs) or any(x.shape[-2:] != xs[0].shape[-2:] for x in xs):
        return None
    if xs[0].shape[-1] % 2:
        return None
    if probe(fn, lambda: _run(fn, pair), "rotary_embedding"):
        return None
    first = (xs[0], cs[0], cs[1])
    if pair:  # Hugging Face's form: (q, k), one op call each
        return Claim(first, finish=tuple, more=((xs[1], cs[0], cs[1]),))
    return Claim(first)


def _contract(args: Sequence) -> str | None:
    why = dense_contract(args)
    if why:
        return why
    x, cos = args[0], args[1]
    if x.dim() != 4 or x.shape[-1] % 2 or cos.numel() != x.shape[2] * x.shape[3]:
        return "not (B, H, S, D) x with (S, D) cos/sin"
    return None


def _size(a: Sequence) -> Size:
    return dict(zip(("batch", "heads", "seq", "head_dim"), a[0].shape, strict=True))


ROTARY_EMBEDDING_MODEL = ModelSide(
    "(Tensor x, Tensor cos, Tensor sin, int slot) -> Tensor",
    3,
    like,
    _size,
    "model functions that compute rotary embeddings on (B, H, S, D) tensors (probed)",
    function=_function,
    function_may_claim=_may_claim,
    # fused into its neighbours by Inductor, not one kernel that names it: the ratio stands
)
