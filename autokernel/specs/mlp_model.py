"""The model side of fused_mlp: a SwiGLU MLP module, down(silu(gate(x)) * up(x)), probed.

Two layouts of the weights are claimed, by the Linears' names:
- split: three Linears, gate/up/down (Hugging Face) or w1/w3/w2 (Meta);
- fused: one Linear producing gate and up concatenated along its outputs, then a down Linear
  (Phi-3's gate_up_proj/down_proj and the many models written after it). The module chunks
  the product in two; which half is the gate differs between models, so both orders are
  probed and the one the module computes is kept. The kernel takes gate and up as two
  (intermediate, hidden) weights: here they are the two row halves of the fused weight,
  views into it (row slices of a row-major matrix: contiguous, nothing copied).

Whatever the layout, the module is claimed only after it computed reference.fused_mlp on a
small input (a GELU MLP, GeGLU, or a fused projection split some other way is left alone).
"""

from __future__ import annotations

import weakref
from collections.abc import Callable
from dataclasses import dataclass

import torch
from torch import nn

from autokernel import reference
from autokernel.specs.model_side import Claim, ModelSide, ModuleSide, Probe, Size

SPLIT_NAMES = (("gate_proj", "up_proj", "down_proj"), ("w1", "w3", "w2"))  # HF and Meta naming
FUSED_NAMES = (("gate_up_proj", "down_proj"), ("w12", "w3"))  # one Linear for gate and up
PROBE_GATE_RMS = 2.0  # gate pre-activations of this size: where SiLU and GELU part ways

Weights = tuple[torch.Tensor, torch.Tensor, torch.Tensor]  # gate, up, down


@dataclass(frozen=True)
class MlpParts:
    """A module's MLP Linears and how the kernel's three weights are read off them."""

    linears: tuple[nn.Linear, ...]  # what a claim takes over
    hidden: int  # the input's last dim
    # order -> (w_gate, w_up, w_down); order 1 (fused only): the up half comes first
    weights: Callable[[int], Weights]
    orders: tuple[int, ...]  # the orders the probe tries, first the common one


def _split(g: nn.Linear, u: nn.Linear, d: nn.Linear) -> MlpParts:
    return MlpParts((g, u, d), g.in_features, lambda order: (g.weight, u.weight, d.weight), (0,))


def _fused(gu: nn.Linear, d: nn.Linear) -> MlpParts | None:
    inter = d.in_features
    if gu.out_features != 2 * inter or d.out_features != gu.in_features:
        return None  # not gate and up side by side (a GELU MLP's up projection)

    def weights(order: int) -> Weights:
        w = gu.weight
        halves = (w[:inter], w[inter:])  # views: no copy of the fused weight
        return (*(halves if order == 0 else halves[::-1]), d.weight)

    return MlpParts((gu, d), gu.in_features, weights, (0, 1))


def mlp_parts(module: nn.Module) -> MlpParts | None:
    """The module's SwiGLU-named Linears, split or fused, or None."""
    for names in SPLIT_NAMES:
        parts = [getattr(module, n, None) for n in names]
        if all(isinstance(p, nn.Linear) for p in parts):
            return _split(*parts)
    for names in FUSED_NAMES:
        parts = [getattr(module, n, None) for n in names]
        if all(isinstance(p, nn.Linear) for p in parts):
            found = _fused(*parts)
            if found is not None:
                return found
    return None


def mlp_linears(module: nn.Module) -> tuple[nn.Module, ...]:
    """The Linears a fused_mlp claim takes over (patching leaves them alone)."""
    parts = mlp_parts(module)
    return parts.linears if parts else ()


def _run_mlp(m: nn.Module, parts: MlpParts, order: int) -> tuple[torch.Tensor, torch.Tensor]:
    # Scaled so the gate's pre-activations are O(1) whatever the weights' scale: near 0 every
    # x * sigmoid-like activation is x / 2 + O(x^2), so with a config's small random init
    # (std 0.02) a GELU MLP (Gemma's GeGLU) matched SwiGLU within bf16 rounding.
    g, u, d = parts.weights(order)
    x = torch.randn(2, parts.hidden, device=g.device)
    rms = torch.nn.functional.linear(x.to(g.dtype), g).double().pow(2).mean().sqrt()
    if rms > 0:
        x = x * (PROBE_GATE_RMS / float(rms))
    x = x.to(g.dtype)
    return type(m).forward(m, x), reference.fused_mlp(x, g, u, d)


class _UpFirst:
    """Stands for a fused MLP probed with the up half first, in the probe's per-owner cache."""


_UP_FIRST: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()  # module -> its stand-in
_ORDER: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()  # claimed module -> order


def _mlp_module(m: nn.Module, probe: Probe) -> str | None:
    parts = mlp_parts(m)
    if parts is None:
        return None
    if any(lin.bias is not None for lin in parts.linears):
        return "SwiGLU-named MLP with biased Linears"
    note = ""
    for order in parts.orders:
        owner = m if order == 0 else _UP_FIRST.setdefault(m, _UpFirst())
        note = probe(owner, lambda o=order: _run_mlp(m, parts, o), "a SwiGLU MLP")
        if not note:
            _ORDER[m] = order
            return ""
    return note


def _mlp_call(m: nn.Module, x: torch.Tensor) -> Claim | None:
    parts = mlp_parts(m)
    if parts is None or x.shape[-1] != parts.hidden:
        return None
    return Claim((x, *parts.weights(_ORDER.get(m, 0))))


def _mlp_size(a) -> Size:
    return {"M": a[0].numel() // a[0].shape[-1], "hidden": a[0].shape[-1], "inter": a[1].shape[0]}


def _has_mlp(m: nn.Module) -> bool:
    return mlp_parts(m) is not None


FUSED_MLP_MODEL = ModelSide(
    "(Tensor x, Tensor w_gate, Tensor w_up, Tensor w_down, int slot) -> Tensor",
    4,
    lambda x, wg, wu, wd, slot: x.new_empty((*x.shape[:-1], wd.shape[0])),
    _mlp_size,
    "modules with gate_proj/up_proj/down_proj or w1/w3/w2 Linears, or a fused gate_up_proj "
    "and down_proj, computing SwiGLU",
    module=ModuleSide(_mlp_module, _mlp_call, owns=mlp_linears, likely=_has_mlp),
    # its GEMMs and SiLU land in separate compiled kernels: the ratio stands
)
