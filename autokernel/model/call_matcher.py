"""The matcher's torch calls: which call of softmax, sum, cross_entropy, attention, the norms or
a matmul is which kernel type, by the callee's name, and only inside the type's semantics
(softmax over the last dim, a sum over the last dim, attention without a mask...): any other
call is no match, so it can be a generic target instead."""

from __future__ import annotations

from collections.abc import Callable

import torch

from autokernel.model.calls import api_name
from autokernel.model.kinds import KINDS, MATMUL_CALLS, SOFTMAX_CALLS, SUM_CALLS
from autokernel.model.match import Match, first

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


def floating(*ts: object) -> bool:
    return all(isinstance(t, torch.Tensor) and t.is_floating_point() for t in ts)


def _softmax(name: str, args: tuple, kwargs: dict) -> Match | None:
    functional = name.endswith("functional.softmax")
    names = ("input", "dim", "_stacklevel", "dtype") if functional else ("input", "dim", "dtype")
    b = _bind(names, args, kwargs)
    if b is None or not floating(b.get("input")) or not _last(b.get("dim"), b["input"]):
        return None
    x, dtype = b["input"], b.get("dtype")
    return Match("softmax", (x if dtype is None else x.to(dtype),))


def _sum(name: str, args: tuple, kwargs: dict) -> Match | None:
    b = _bind(("input", "dim", "keepdim"), args, kwargs)
    if b is None or not floating(b.get("input")) or not _last(b.get("dim"), b["input"]):
        return None
    keep = bool(b.get("keepdim", False))
    return Match("reduce", (b["input"],), finish=_keep_dim if keep else first)


def _keep_dim(outs: list[torch.Tensor]) -> torch.Tensor:
    return outs[0].unsqueeze(-1)


_CE_DEFAULTS = {"weight": None, "size_average": None, "ignore_index": -100, "reduce": None,
                "reduction": "mean", "label_smoothing": 0.0}  # fmt: skip


def _cross_entropy(name: str, args: tuple, kwargs: dict) -> Match | None:
    b = _bind(("input", "target", *_CE_DEFAULTS), args, kwargs)
    if b is None or any(b.get(k, v) != v for k, v in _CE_DEFAULTS.items()):
        return None
    logits, targets = b.get("input"), b.get("target")
    if not floating(logits) or not isinstance(targets, torch.Tensor):
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
    if not floating(q, k, v) or q.dim() != 4 or k.dim() != 4 or v.dim() != 4:
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
    return t if floating(t) and t.shape == (x.shape[-1],) else None


def _layer_norm(name: str, args: tuple, kwargs: dict) -> Match | None:
    b = _bind(("input", "normalized_shape", "weight", "bias", "eps"), args, kwargs)
    if b is None or not floating(b.get("input")):
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
    if b is None or not floating(b.get("input")):
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
    if not floating(a, w) or a.dim() < 2 or w.dim() != 2:
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
