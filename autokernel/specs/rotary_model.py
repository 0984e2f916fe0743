"""The model side of rotary_embedding: a model function that rotates (B, H, S, D) tensors by
(S, D) cos/sin tables, fn(x, cos, sin) -> x or Hugging Face's fn(q, k, cos, sin, ...) -> (q, k),
probed once against reference.py whatever its name.

Two forms beyond LLaMA's are claimed, because whole families use them:
- partial rotary (GPT-NeoX/Pythia, Phi-3 with partial_rotary_factor < 1): the tables are
  (S, R) with R < D, only the first R dims of each head are rotated and the rest pass
  through. The kernel rotates the (strided, uncopied) prefix view x[..., :R]; the rest is
  concatenated back after it, as the model itself does (the kernel contract returns a new
  tensor, so no in-place write into the model's q/k);
- tables in another dtype than x (OLMo2 keeps cos/sin in fp32 beside bf16 q/k): the kernel's
  contract, and so everything the harness judged, is tables in x's dtype (any other call fell
  back to PyTorch as "mixed dtypes"), so the claim casts the tables to x's dtype: one rounding
  of each table entry, as LLaMA's own rotary embedding does before it rotates.
"""

from __future__ import annotations

import functools
import inspect
import types
import weakref
from collections.abc import Callable, Sequence

import torch

from autokernel import reference
from autokernel.specs.model_side import (
    Claim,
    ModelSide,
    Probe,
    Size,
    dense_contract,
    first,
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
    """The (S, R) table of a call on (B, H, S, D) x, R <= D even (R < D: partial rotary)."""
    if not isinstance(t, torch.Tensor) or x.dim() != 4 or t.dim() < 2:
        return None
    seq, width = t.shape[-2:]
    if seq != x.shape[-2] or width > x.shape[-1] or width == 0 or width % 2:
        return None
    return t.reshape(seq, width) if all(n == 1 for n in t.shape[:-2]) else None


PROBE_DIM = 8  # head_dim of the probe; a partial call is probed rotating half of it

# A function called with partial tables is probed in that form, and that verdict is cached
# apart from the full form's (the probe caches per owner): one stand-in owner per function.
_PARTIAL_OWNER: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


class _PartialForm:
    """Stands for a function called with tables narrower than its heads, in the probe cache."""


def _owner(fn: Callable, partial: bool) -> object:
    if not partial:
        return fn
    try:
        return _PARTIAL_OWNER.setdefault(fn, _PartialForm())
    except TypeError:  # not weakly referable: probed anew each call
        return _PartialForm()


def _run(fn: Callable, pair: bool, width: int) -> tuple[torch.Tensor, torch.Tensor]:
    """(fn's result, reference.py's) on a small input whose tables rotate `width` dims."""
    gen = torch.Generator().manual_seed(0)
    x = torch.randn(1, 2, 3, PROBE_DIM, generator=gen)
    freqs = torch.randn(3, width // 2, generator=gen)
    cos, sin = torch.cat((freqs, freqs), -1).cos(), torch.cat((freqs, freqs), -1).sin()
    want = passed_through(reference.rotary_embedding(x[..., :width], cos, sin), x)
    if pair:
        return fn(x, x, cos[None], sin[None])[1], want
    return fn(x, cos, sin), want


def passed_through(rotated: torch.Tensor, x: torch.Tensor) -> torch.Tensor:
    """The rotated prefix with x's remaining dims after it (x itself when nothing remains)."""
    width = rotated.shape[-1]
    return rotated if width == x.shape[-1] else torch.cat((rotated, x[..., width:]), dim=-1)


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
    if xs[0].shape[-1] % 2 or cs[0].shape != cs[1].shape:
        return None
    width, full = cs[0].shape[-1], xs[0].shape[-1]
    partial = width < full
    probe_width = PROBE_DIM // 2 if partial else PROBE_DIM
    if probe(_owner(fn, partial), lambda: _run(fn, pair, probe_width), "rotary_embedding"):
        return None
    # tables in each x's dtype, as the kernel takes them (see above); a no-op where they are
    calls = tuple((x[..., :width] if partial else x, *(c.to(x.dtype) for c in cs)) for x in xs)
    if not partial:
        return Claim(calls[0], finish=tuple if pair else first, more=calls[1:])
    rest = xs  # the pass-through dims are read from the inputs after the kernel ran

    def finish(outs: list[torch.Tensor]) -> object:
        done = tuple(passed_through(o, x) for o, x in zip(outs, rest, strict=True))
        return done if pair else done[0]

    return Claim(calls[0], finish=finish, more=calls[1:])


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
