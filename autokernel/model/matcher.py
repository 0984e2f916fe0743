"""The one matcher: which module, call or model function is which of the nine kernel types.

profile labels what it claims (so the time inside is one target of that type) and verify
replaces exactly the same things, so every target a plan holds is one verify can plug in. A
match names the op's arguments, the size in the spec's dims, the plan's arguments (eps, causal)
and how the op's output becomes what the original returned (a Linear's bias and leading dims,
a kept dim). Modules and functions matched by duck typing (an RMSNorm without the name, a
SwiGLU MLP, a rotary function) are probed once on a tiny input against reference.py: a module
computing something else (Gemma's 1 + weight, a GELU MLP) is not that type, with a note. A
call outside a type's semantics (softmax over dim 0, a sum over a middle dim, an attention
with a mask) is no match at all, so it can be a generic target instead.

This module matches modules and the model's own functions; torch calls are call_matcher.py's
and the Match record is match.py's.
"""

from __future__ import annotations

import inspect
import types
import weakref
from collections.abc import Callable

import torch
from torch import nn

from autokernel import reference
from autokernel.model.call_matcher import floating
from autokernel.model.match import Match

PROBE_TOL = {torch.float32: 1e-4, torch.float64: 1e-9}  # else 2e-2 (half types)
MLP_NAMES = (("gate_proj", "up_proj", "down_proj"), ("w1", "w3", "w2"))  # HF and Meta naming


# ---- probes ---------------------------------------------------------------------------------

_PROBED: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()  # module/function -> note


def _close(a: torch.Tensor, b: torch.Tensor) -> bool:
    tol = PROBE_TOL.get(a.dtype, 2e-2)
    return a.shape == b.shape and bool(((a.float() - b.float()).abs() <= tol * (1 + b.abs())).all())


def _probe(owner: object, run: Callable[[], tuple[torch.Tensor, torch.Tensor]], what: str) -> str:
    """'' when the owner computes `what` on a small random input (cached per owner)."""
    try:
        return _PROBED[owner]
    except (KeyError, TypeError):
        pass
    from autokernel.model.kernel_ops import inside_op

    try:
        with torch.no_grad(), inside_op():  # the originals run unpatched, unlabelled
            got, want = run()
        note = "" if _close(got, want) else f"does not compute {what} (probed on a small input)"
    except Exception as exc:  # any failure means: not the pattern we know
        note = f"{what} probe raised {type(exc).__name__}: {exc}"
    try:
        _PROBED[owner] = note
    except TypeError:
        pass
    return note


def eps_of(m: nn.Module, dtype: torch.dtype) -> float:
    eps = getattr(m, "eps", getattr(m, "variance_epsilon", None))
    return float(torch.finfo(dtype).eps if eps is None else eps)  # nn.RMSNorm: eps=None


# ---- modules --------------------------------------------------------------------------------


def _mlp_linears(module: nn.Module) -> tuple[nn.Linear, nn.Linear, nn.Linear] | None:
    for names in MLP_NAMES:
        parts = [getattr(module, n, None) for n in names]
        if all(isinstance(p, nn.Linear) for p in parts):
            return parts[0], parts[1], parts[2]
    return None


def mlp_linears(module: nn.Module) -> tuple[nn.Linear, ...]:
    """The Linears a fused_mlp match takes over (patching leaves them alone)."""
    return _mlp_linears(module) or ()


def _rmsnorm_like(m: nn.Module) -> bool:
    w = getattr(m, "weight", None)
    named = isinstance(m, getattr(nn, "RMSNorm", ())) or "rmsnorm" in type(m).__name__.lower()
    plain = (
        isinstance(w, torch.Tensor) and w.dim() == 1 and getattr(m, "bias", None) is None
        and (hasattr(m, "eps") or hasattr(m, "variance_epsilon"))
    )  # fmt: skip
    return named or plain


def module_kind(m: nn.Module) -> tuple[str | None, str]:
    """(the type a module computes as a whole, or None; why a likely one was not matched).
    Modules matched by duck typing are probed once."""
    cls = type(m)
    if isinstance(m, nn.Linear):
        if cls.forward is not nn.Linear.forward:
            return None, "a Linear subclass with its own forward"
        return "matmul", ""
    if isinstance(m, nn.LayerNorm):
        if cls.forward is not nn.LayerNorm.forward:
            return None, "a LayerNorm subclass with its own forward"
        if len(m.normalized_shape) != 1 or m.weight is None or m.bias is None:
            return None, "LayerNorm not over one dim with weight and bias"
        return "layernorm", ""
    linears = _mlp_linears(m)
    if linears is not None:
        if any(lin.bias is not None for lin in linears):
            return None, "SwiGLU-named MLP with biased Linears"
        note = _probe(m, lambda: _run_mlp(m, *linears), "a SwiGLU MLP")
        return (None, note) if note else ("fused_mlp", "")
    if _rmsnorm_like(m):
        w = getattr(m, "weight", None)
        if not isinstance(w, torch.Tensor) or w.dim() != 1:
            return None, "RMSNorm-like module without a 1-D weight"
        note = _probe(m, lambda: _run_rmsnorm(m, w), "rmsnorm")
        return (None, note) if note else ("rmsnorm", "")
    return None, ""


def match_module(m: nn.Module, args: tuple, kwargs: dict) -> Match | None:
    """The type a module's forward computes as a whole, for this call, or None."""
    kind, _ = module_kind(m)
    x = args[0] if args else next(iter(kwargs.values()), None)
    if kind is None or len(args) + len(kwargs) != 1:  # the types' modules take one tensor
        return None
    if not isinstance(x, torch.Tensor) or not x.is_floating_point() or x.dim() == 0:
        return None
    if kind == "matmul":
        if x.shape[-1] != m.in_features:
            return None
        return Match("matmul", (x.reshape(-1, m.in_features), m.weight.t()),
                     finish=_linear_finish(m, x))  # fmt: skip
    if kind == "layernorm":
        if x.shape[-1] != m.normalized_shape[0]:
            return None
        eps = float(m.eps)
        return Match("layernorm", (x, m.weight, m.bias, eps), {"eps": eps})
    if kind == "fused_mlp":
        g, u, d = _mlp_linears(m)  # type: ignore[misc]
        if x.shape[-1] != g.in_features:
            return None
        return Match("fused_mlp", (x, g.weight, u.weight, d.weight))
    w = m.weight
    if x.shape[-1] != w.shape[0]:
        return None
    eps = eps_of(m, x.dtype)
    return Match("rmsnorm", (x, w, eps), {"eps": eps})


def _linear_finish(m: nn.Linear, x: torch.Tensor) -> Callable[[torch.Tensor], torch.Tensor]:
    lead = x.shape[:-1]

    def finish(outs: list[torch.Tensor]) -> torch.Tensor:
        out = outs[0] if m.bias is None else outs[0] + m.bias
        return out.reshape(*lead, m.out_features)

    return finish


def _run_rmsnorm(m: nn.Module, w: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    x = torch.randn(3, w.shape[0], dtype=w.dtype, device=w.device)
    return type(m).forward(m, x), reference.rmsnorm(x, w, eps_of(m, x.dtype))


def _run_mlp(m: nn.Module, g, u, d) -> tuple[torch.Tensor, torch.Tensor]:
    x = torch.randn(2, g.in_features, dtype=g.weight.dtype, device=g.weight.device)
    return type(m).forward(m, x), reference.fused_mlp(x, g.weight, u.weight, d.weight)


# ---- the model's functions --------------------------------------------------------------------


def n_required(fn: Callable) -> int:
    params = inspect.signature(fn).parameters.values()
    return sum(p.default is p.empty and p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)
               for p in params)  # fmt: skip


def _table(t: object, x: torch.Tensor) -> torch.Tensor | None:
    if not isinstance(t, torch.Tensor) or x.dim() != 4 or t.shape[-2:] != x.shape[-2:]:
        return None
    return t.reshape(x.shape[-2:]) if all(n == 1 for n in t.shape[:-2]) else None


def match_function(fn: types.FunctionType, args: tuple, kwargs: dict) -> Match | None:
    """A model function that computes rotary embeddings: fn(x, cos, sin) -> x rotated, or
    fn(q, k, cos, sin, ...) -> (q, k) rotated (Hugging Face's), with (S, D) tables."""
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
    if _probe(fn, lambda: _run_rotary(fn, pair), "rotary_embedding"):
        return None
    first = (xs[0], cs[0], cs[1])
    if pair:  # Hugging Face's form: (q, k), one op call each
        return Match("rotary_embedding", first, finish=tuple, more=((xs[1], cs[0], cs[1]),))
    return Match("rotary_embedding", first)


def _run_rotary(fn: Callable, pair: bool) -> tuple[torch.Tensor, torch.Tensor]:
    gen = torch.Generator().manual_seed(0)
    x = torch.randn(1, 2, 3, 8, generator=gen)
    freqs = torch.randn(3, 4, generator=gen)
    cos, sin = torch.cat((freqs, freqs), -1).cos(), torch.cat((freqs, freqs), -1).sin()
    want = reference.rotary_embedding(x, cos, sin)
    if pair:
        return fn(x, x, cos[None], sin[None])[1], want
    return fn(x, cos, sin), want
