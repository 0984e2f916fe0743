"""The model side of the row-wise types (softmax, layernorm, rmsnorm, reduce): which calls and
modules they are, only over the last dim; a softmax over dim 0 or a sum over a middle dim is
no match, so it can become a generic target instead."""

from __future__ import annotations

import contextlib
import math
from collections.abc import Iterator, Mapping, Sequence

import torch
from torch import nn

from autokernel import reference
from autokernel.specs.model_side import (
    Claim,
    ModelSide,
    ModuleSide,
    Probe,
    Size,
    bind,
    concrete,
    first,
    floating,
    last_dim,
    like,
)

SOFTMAX_CALLS = ("torch.softmax", "Tensor.softmax", "torch.nn.functional.softmax")


def rows_cols(args: Sequence) -> Size:
    a = args[0]
    return {"rows": a.numel() // max(1, a.shape[-1]), "cols": a.shape[-1]}


def same_rows(call: Mapping[str, int], planned: Mapping[str, int]) -> bool:
    """Row-wise plans may split rows into batch x rows; compare the flattened row count."""
    rows = planned.get("batch", 1) * planned.get("rows", 0)
    return (rows, planned.get("cols")) == (call["rows"], call["cols"])


def _event_rows(shape: list[int]) -> Size:
    return {"rows": math.prod(shape[:-1]), "cols": shape[-1]}


def _first_shape(event) -> list[int]:
    shapes = event.input_shapes
    return shapes[0] if shapes else []


def _over_last(event) -> tuple[Size, dict[str, object]] | None:
    """A profiled softmax or sum over the last dim (its dim is the op's second argument)."""
    x = _first_shape(event)
    if not x or not last_dim(concrete(event, 1), len(x)):
        return None
    return _event_rows(x), {}


def _eps_at(index: int):
    def parse(event) -> tuple[Size, dict[str, object]] | None:
        x = _first_shape(event)
        if not x:
            return None
        eps = concrete(event, index)
        return _event_rows(x), {"eps": eps} if isinstance(eps, float) else {}

    return parse


def _layer_norm_event(event) -> tuple[Size, dict[str, object]] | None:
    normalized = concrete(event, 1)
    if not isinstance(normalized, list | tuple) or len(normalized) != 1:
        return None
    return _eps_at(4)(event)


# ---- torch calls -------------------------------------------------------------------------------


def _softmax(name: str, args: tuple, kwargs: dict) -> Claim | None:
    functional = name.endswith("functional.softmax")
    names = ("input", "dim", "_stacklevel", "dtype") if functional else ("input", "dim", "dtype")
    b = bind(names, args, kwargs)
    if b is None or not floating(b.get("input")) or not last_dim(b.get("dim"), b["input"].dim()):
        return None
    x, dtype = b["input"], b.get("dtype")
    return Claim((x if dtype is None else x.to(dtype),))


def _keep_dim(outs: list[torch.Tensor]) -> torch.Tensor:
    return outs[0].unsqueeze(-1)


def _sum(name: str, args: tuple, kwargs: dict) -> Claim | None:
    b = bind(("input", "dim", "keepdim"), args, kwargs)
    if b is None or not floating(b.get("input")) or not last_dim(b.get("dim"), b["input"].dim()):
        return None
    keep = bool(b.get("keepdim", False))
    return Claim((b["input"],), finish=_keep_dim if keep else first)


def _affine(b: dict, name: str, x: torch.Tensor, fill: float) -> torch.Tensor | None:
    """A norm's weight or bias, or the identity one (ones, zeros) where the call has none:
    the op always takes both, and applying the identity changes nothing."""
    t = b.get(name)
    if t is None:
        return torch.full((x.shape[-1],), fill, dtype=x.dtype, device=x.device)
    return t if floating(t) and t.shape == (x.shape[-1],) else None


def _over_last_shape(b: dict | None) -> torch.Tensor | None:
    """The input of a norm call normalizing over exactly the last dim."""
    if b is None or not floating(b.get("input")):
        return None
    x, shape = b["input"], b.get("normalized_shape")
    if x.dim() == 0 or tuple(shape or ()) != (x.shape[-1],):
        return None
    return x


def _layer_norm(name: str, args: tuple, kwargs: dict) -> Claim | None:
    b = bind(("input", "normalized_shape", "weight", "bias", "eps"), args, kwargs)
    x = _over_last_shape(b)
    if x is None:
        return None
    w, bias = _affine(b, "weight", x, 1.0), _affine(b, "bias", x, 0.0)
    if w is None or bias is None:
        return None
    eps = float(b.get("eps", 1e-5))
    return Claim((x, w, bias, eps), {"eps": eps})


def _rms_norm(name: str, args: tuple, kwargs: dict) -> Claim | None:
    b = bind(("input", "normalized_shape", "weight", "eps"), args, kwargs)
    x = _over_last_shape(b)
    if x is None:
        return None
    w = _affine(b, "weight", x, 1.0)
    if w is None:
        return None
    eps = b.get("eps")
    eps = float(torch.finfo(x.dtype).eps if eps is None else eps)
    return Claim((x, w, eps), {"eps": eps})


# ---- modules -----------------------------------------------------------------------------------


def _layernorm_module(m: nn.Module, probe: Probe) -> str | None:
    if not isinstance(m, nn.LayerNorm):
        return None
    if type(m).forward is not nn.LayerNorm.forward:
        return "a LayerNorm subclass with its own forward"
    if len(m.normalized_shape) != 1 or m.weight is None or m.bias is None:
        return "LayerNorm not over one dim with weight and bias"
    return ""


def _layernorm_call(m: nn.Module, x: torch.Tensor) -> Claim | None:
    if x.shape[-1] != m.normalized_shape[0]:
        return None
    eps = float(m.eps)
    return Claim((x, m.weight, m.bias, eps), {"eps": eps})


def eps_of(m: nn.Module, dtype: torch.dtype) -> float:
    eps = getattr(m, "eps", getattr(m, "variance_epsilon", None))
    return float(torch.finfo(dtype).eps if eps is None else eps)  # nn.RMSNorm: eps=None


def _named_rmsnorm(m: nn.Module) -> bool:
    return "rmsnorm" in type(m).__name__.lower()


def _rmsnorm_like(m: nn.Module) -> bool:
    w = getattr(m, "weight", None)
    named = isinstance(m, getattr(nn, "RMSNorm", ())) or _named_rmsnorm(m)
    plain = (
        isinstance(w, torch.Tensor) and w.dim() == 1 and getattr(m, "bias", None) is None
        and (hasattr(m, "eps") or hasattr(m, "variance_epsilon"))
    )  # fmt: skip
    return named or plain


def _run_rmsnorm(m: nn.Module, w: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    # Probed with a random weight of our own, not the checkpoint's: that is all zeros in a
    # fresh Gemma, all ones in a fresh Llama (a module ignoring its weight would pass), and
    # can be large enough after training that Gemma's 1 + w passes for w in half precision.
    x = torch.randn(3, w.shape[0], dtype=w.dtype, device=w.device)
    probe_w = torch.randn(w.shape, dtype=w.dtype, device=w.device)
    with _weight_swapped(m, probe_w):
        got = type(m).forward(m, x)
    return got, reference.rmsnorm(x, probe_w, eps_of(m, x.dtype))


@contextlib.contextmanager
def _weight_swapped(m: nn.Module, w: torch.Tensor) -> Iterator[None]:
    """m.weight is `w` inside; the module's own tensor is never written to."""
    table = m._parameters if "weight" in m._parameters else m._buffers
    if "weight" not in table:
        raise TypeError("weight is neither a parameter nor a buffer")
    saved = table["weight"]
    table["weight"] = nn.Parameter(w, requires_grad=False) if table is m._parameters else w
    try:
        yield
    finally:
        table["weight"] = saved


def _rmsnorm_module(m: nn.Module, probe: Probe) -> str | None:
    """Any module computing RMSNorm with a weight, whatever its name: probed once."""
    if not _rmsnorm_like(m):
        return None
    w = getattr(m, "weight", None)
    if not isinstance(w, torch.Tensor) or w.dim() != 1:
        return "RMSNorm-like module without a 1-D weight"
    return probe(m, lambda: _run_rmsnorm(m, w), "rmsnorm")


def _rmsnorm_call(m: nn.Module, x: torch.Tensor) -> Claim | None:
    w = m.weight
    if x.shape[-1] != w.shape[0]:
        return None
    eps = eps_of(m, x.dtype)
    return Claim((x, w, eps), {"eps": eps})


SOFTMAX_MODEL = ModelSide(
    "(Tensor x, int slot) -> Tensor",
    1,
    like,
    rows_cols,
    "softmax over the last dim (torch.softmax, F.softmax, x.softmax)",
    calls=dict.fromkeys(SOFTMAX_CALLS, _softmax),
    aten=dict.fromkeys(("aten::softmax", "aten::_softmax", "aten::special_softmax"), _over_last),
    inductor_names=("_softmax",),
    inductor_rank=4,  # after cross_entropy: its kernels are named `_log_softmax_nll_loss`
    compiled="names",
    same_size=same_rows,
)
LAYERNORM_MODEL = ModelSide(
    "(Tensor x, Tensor weight, Tensor bias, float eps, int slot) -> Tensor",
    3,
    like,
    rows_cols,
    "nn.LayerNorm modules and F.layer_norm over the last dim with weight, bias",
    calls={"torch.nn.functional.layer_norm": _layer_norm},
    module=ModuleSide(_layernorm_module, _layernorm_call),
    aten=dict.fromkeys(("aten::layer_norm", "aten::native_layer_norm"), _layer_norm_event),
    inductor_names=("layer_norm",),
    inductor_rank=1,  # before rmsnorm: a decomposed layer norm has an rsqrt too
    compiled="names",
    same_size=same_rows,
)
RMSNORM_MODEL = ModelSide(
    "(Tensor x, Tensor weight, float eps, int slot) -> Tensor",
    2,
    like,
    rows_cols,
    "modules that compute RMSNorm with a weight (probed), F.rms_norm with a weight",
    calls=dict.fromkeys(("torch.nn.functional.rms_norm", "torch.rms_norm"), _rms_norm),
    module=ModuleSide(_rmsnorm_module, _rmsnorm_call, likely=_named_rmsnorm),
    aten=dict.fromkeys(("aten::rms_norm", "aten::_fused_rms_norm"), _eps_at(3)),
    inductor_names=("rms_norm", "rsqrt"),
    inductor_rank=2,
    compiled="names",
    same_size=same_rows,
)
REDUCE_MODEL = ModelSide(
    "(Tensor x, int slot) -> Tensor",
    1,
    lambda x, slot: x.new_empty(x.shape[:-1]),
    rows_cols,
    "floating-point sums over the last dim (torch.sum, x.sum)",
    calls=dict.fromkeys(("torch.sum", "Tensor.sum"), _sum),
    aten={"aten::sum": _over_last},
    same_size=same_rows,  # a fused sum is not one kernel that names it: the ratio stands
)
