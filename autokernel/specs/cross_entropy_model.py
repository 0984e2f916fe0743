"""The model side of cross_entropy: F.cross_entropy with (N, V) logits and int64 targets, mean
over the rows, ignore_index -100, no class weights or label smoothing."""

from __future__ import annotations

from collections.abc import Sequence

import torch

from autokernel.specs.model_side import Claim, ModelSide, Size, bind, floating

# The arguments the kernel computes as they are by default; any other value is no match.
DEFAULTS = {"weight": None, "size_average": None, "ignore_index": -100, "reduce": None,
            "reduction": "mean", "label_smoothing": 0.0}  # fmt: skip


def _call(name: str, args: tuple, kwargs: dict) -> Claim | None:
    b = bind(("input", "target", *DEFAULTS), args, kwargs)
    if b is None or any(b.get(k, v) != v for k, v in DEFAULTS.items()):
        return None
    logits, targets = b.get("input"), b.get("target")
    if not floating(logits) or not isinstance(targets, torch.Tensor):
        return None
    if logits.dim() != 2 or targets.dim() != 1 or targets.dtype != torch.int64:
        return None
    return Claim((logits, targets), finish=lambda o: o[0].to(logits.dtype))


def _event(event) -> tuple[Size, dict[str, object]] | None:
    shapes = event.input_shapes
    x = shapes[0] if shapes else []
    return ({"rows": x[0], "vocab": x[1]}, {}) if len(x) == 2 else None


def _fake(logits: torch.Tensor, targets: torch.Tensor, slot: int) -> torch.Tensor:
    out = torch.float64 if logits.dtype == torch.float64 else torch.float32
    return logits.new_empty((), dtype=out)


def _contract(args: Sequence) -> str | None:
    """Targets are int64, so the one-dtype rule of the others does not apply."""
    return None if args[0].dim() == 2 and args[1].dim() == 1 else "not (N, V) logits"


CROSS_ENTROPY_MODEL = ModelSide(
    "(Tensor logits, Tensor targets, int slot) -> Tensor",
    2,
    _fake,
    lambda a: {"rows": a[0].shape[0], "vocab": a[0].shape[1]},
    "F.cross_entropy calls (mean, ignore_index -100, no weights or smoothing)",
    calls={"torch.nn.functional.cross_entropy": _call},
    aten={"aten::cross_entropy_loss": _event},
    inductor_names=("nll_loss",),
    inductor_rank=3,
    compiled="names",
    contract=_contract,
)
