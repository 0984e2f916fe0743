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
"""

from __future__ import annotations

import inspect
import types
import weakref
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import torch
from torch import nn

from autokernel import reference
from autokernel.model.calls import api_name
from autokernel.model.kinds import KINDS, MATMUL_CALLS, SOFTMAX_CALLS, SUM_CALLS, call_size

PROBE_TOL = {torch.float32: 1e-4, torch.float64: 1e-9}  # else 2e-2 (half types)
MLP_NAMES = (("gate_proj", "up_proj", "down_proj"), ("w1", "w3", "w2"))  # HF and Meta naming


def _first(outs: list[torch.Tensor]) -> torch.Tensor:
    return outs[0]


@dataclass
class Match:
    kind: str
    op_args: tuple  # the custom op's arguments, the slot left out
    args: dict[str, object] = field(default_factory=dict)  # what plan.yaml keeps: eps, causal
    finish: Callable[[list[torch.Tensor]], Any] = _first  # op outputs -> what the original gave
    more: tuple[tuple, ...] = ()  # further calls of the op (the k of a (q, k) rotary)

    @property
    def calls(self) -> tuple[tuple, ...]:
        return (self.op_args, *self.more)

    @property
    def shape(self) -> dict[str, int]:
        return call_size(self.kind, self.op_args)

    @property
    def dtype(self) -> torch.dtype:
        return self.op_args[0].dtype


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


# ---- torch calls ------------------------------------------------------------------------------


def _bind(names: tuple[str, ...], args: tuple, kwargs: dict) -> dict | None:
    """Arguments by name, for a callee whose positional order is `names` (Tensor methods: self
    first); None when a keyword is not one of them."""
    bound = dict(zip(names, args, strict=False))
    for k, v in kwargs.items():
        if k not in names or k in bound:
            return None
        bound[k] = v
    return bound


def _last(dim: object, x: torch.Tensor) -> bool:
    if isinstance(dim, list | tuple) and len(dim) == 1:
        dim = dim[0]
    return isinstance(dim, int) and x.dim() > 0 and dim in (-1, x.dim() - 1)


def _floating(*ts: object) -> bool:
    return all(isinstance(t, torch.Tensor) and t.is_floating_point() for t in ts)


def _softmax(name: str, args: tuple, kwargs: dict) -> Match | None:
    functional = name.endswith("functional.softmax")
    names = ("input", "dim", "_stacklevel", "dtype") if functional else ("input", "dim", "dtype")
    b = _bind(names, args, kwargs)
    if b is None or not _floating(b.get("input")) or not _last(b.get("dim"), b["input"]):
        return None
    x, dtype = b["input"], b.get("dtype")
    return Match("softmax", (x if dtype is None else x.to(dtype),))


def _sum(name: str, args: tuple, kwargs: dict) -> Match | None:
    b = _bind(("input", "dim", "keepdim"), args, kwargs)
    if b is None or not _floating(b.get("input")) or not _last(b.get("dim"), b["input"]):
        return None
    keep = bool(b.get("keepdim", False))
    return Match("reduce", (b["input"],), finish=_keep_dim if keep else _first)


def _keep_dim(outs: list[torch.Tensor]) -> torch.Tensor:
    return outs[0].unsqueeze(-1)


_CE_DEFAULTS = {"weight": None, "size_average": None, "ignore_index": -100, "reduce": None,
                "reduction": "mean", "label_smoothing": 0.0}  # fmt: skip


def _cross_entropy(name: str, args: tuple, kwargs: dict) -> Match | None:
    b = _bind(("input", "target", *_CE_DEFAULTS), args, kwargs)
    if b is None or any(b.get(k, v) != v for k, v in _CE_DEFAULTS.items()):
        return None
    logits, targets = b.get("input"), b.get("target")
    if not _floating(logits) or not isinstance(targets, torch.Tensor):
        return None
    if logits.dim() != 2 or targets.dim() != 1 or targets.dtype != torch.int64:
        return None
    return Match("cross_entropy", (logits, targets), finish=lambda o: o[0].to(logits.dtype))


def _sdpa(name: str, args: tuple, kwargs: dict) -> Match | None:
    names = ("query", "key", "value", "attn_mask", "dropout_p", "is_causal", "scale", "enable_gqa")
    b = _bind(names, args, kwargs)
    if b is None or b.get("attn_mask") is not None or b.get("dropout_p", 0.0):
        return None
    q, k, v = (b.get(n) for n in ("query", "key", "value"))
    if not _floating(q, k, v) or q.dim() != 4 or k.dim() != 4 or v.dim() != 4:
        return None
    if k.shape[2] != q.shape[2]:
        return None  # cross-attention lengths: not what the flash kernel computes
    if k.shape[1] != q.shape[1] and not b.get("enable_gqa", False):
        return None
    causal, scale = bool(b.get("is_causal", False)), b.get("scale")
    sm_scale = None if scale is None else float(scale)
    extra = {"causal": causal} | ({"sm_scale": sm_scale} if sm_scale is not None else {})
    return Match("flash_attention", (q, k, v, causal, sm_scale), extra)


def _affine(b: dict, name: str, x: torch.Tensor, fill: float) -> torch.Tensor | None:
    """A norm's weight or bias, or the identity one (ones, zeros) where the call has none:
    the op always takes both, and applying the identity changes nothing."""
    t = b.get(name)
    if t is None:
        return torch.full((x.shape[-1],), fill, dtype=x.dtype, device=x.device)
    return t if _floating(t) and t.shape == (x.shape[-1],) else None


def _layer_norm(name: str, args: tuple, kwargs: dict) -> Match | None:
    b = _bind(("input", "normalized_shape", "weight", "bias", "eps"), args, kwargs)
    if b is None or not _floating(b.get("input")):
        return None
    x, shape = b["input"], b.get("normalized_shape")
    if x.dim() == 0 or tuple(shape or ()) != (x.shape[-1],):
        return None
    w, bias = _affine(b, "weight", x, 1.0), _affine(b, "bias", x, 0.0)
    if w is None or bias is None:
        return None
    eps = float(b.get("eps", 1e-5))
    return Match("layernorm", (x, w, bias, eps), {"eps": eps})


def _rms_norm(name: str, args: tuple, kwargs: dict) -> Match | None:
    b = _bind(("input", "normalized_shape", "weight", "eps"), args, kwargs)
    if b is None or not _floating(b.get("input")):
        return None
    x, shape = b["input"], b.get("normalized_shape")
    if x.dim() == 0 or tuple(shape or ()) != (x.shape[-1],):
        return None
    w = _affine(b, "weight", x, 1.0)
    if w is None:
        return None
    eps = b.get("eps")
    eps = float(torch.finfo(x.dtype).eps if eps is None else eps)
    return Match("rmsnorm", (x, w, eps), {"eps": eps})


def _matmul(name: str, args: tuple, kwargs: dict) -> Match | None:
    linear = name.endswith("functional.linear")
    b = _bind(("input", "weight", "bias") if linear else ("input", "other"), args, kwargs)
    if b is None:
        return None
    a, w = b.get("input"), b.get("weight" if linear else "other")
    if not _floating(a, w) or a.dim() < 2 or w.dim() != 2:
        return None
    k = w.shape[1] if linear else w.shape[0]
    if a.shape[-1] != k:
        return None
    lead, bias = a.shape[:-1], b.get("bias")
    n = w.shape[0] if linear else w.shape[1]

    def finish(outs: list[torch.Tensor]) -> torch.Tensor:
        return (outs[0] if bias is None else outs[0] + bias).reshape(*lead, n)

    return Match("matmul", (a.reshape(-1, k), w.t() if linear else w), finish=finish)


CALLS: dict[str, Callable[[str, tuple, dict], Match | None]] = {
    **dict.fromkeys(SOFTMAX_CALLS, _softmax),
    **dict.fromkeys(SUM_CALLS, _sum),
    **dict.fromkeys(MATMUL_CALLS, _matmul),
    "torch.nn.functional.cross_entropy": _cross_entropy,
    "torch.nn.functional.scaled_dot_product_attention": _sdpa,
    "torch.nn.functional.layer_norm": _layer_norm,
    "torch.nn.functional.rms_norm": _rms_norm,
    "torch.rms_norm": _rms_norm,
}
assert {n for side in KINDS.values() for n in side.calls} == set(CALLS), "calls in the registry"


def match_call(func: Callable, args: tuple, kwargs: dict, name: str | None = None) -> Match | None:
    """The kernel type of a torch call, by the callee's name (given where it is known already:
    verify's router looks callees up by identity, which torch.compile traces)."""
    name = name or api_name(func)
    matcher = CALLS.get(name)
    return matcher(name, args, kwargs) if matcher is not None else None


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
    if len(tables) != 2 or len(args) != len(xs) + 2 or not _floating(*xs, *tables):
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
