"""Patched outputs against eager: every tensor, its error relative to the eager output's scale.

max|patched - eager| / max(1, max|eager|) against the dtype's harness tolerance times
ACCUMULATION_FACTOR; a shape, dtype or NaN-pattern mismatch is an infinite error.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch

from autokernel.specs import TOLERANCES, dtype_name

# Each patched op may differ from eager by up to its harness tolerance, and independent rounding
# differences grow slowly through residual layers; 5x leaves room for that in a small model
# while a wrong kernel (errors of the order of the output's scale) fails by orders of magnitude.
ACCUMULATION_FACTOR = 5.0


@dataclass
class OutputCheck:
    name: str
    dtype: str
    error: float  # max|diff| / max(1, max|ref|); inf for a shape, dtype or NaN mismatch
    tolerance: float

    @property
    def ok(self) -> bool:
        return self.error <= self.tolerance


def _tensors(obj: Any, name: str = "output") -> list[tuple[str, torch.Tensor]]:
    if isinstance(obj, torch.Tensor):
        return [(name, obj)]
    if isinstance(obj, dict):
        return [t for k, v in obj.items() for t in _tensors(v, f"{name}.{k}")]
    if isinstance(obj, (list, tuple)):
        return [t for i, v in enumerate(obj) for t in _tensors(v, f"{name}[{i}]")]
    return []


def compare(ref: Any, out: Any, model_dtype: torch.dtype, factor: float) -> list[OutputCheck]:
    """Every tensor in the outputs, error relative to the eager output's scale."""
    refs, outs = _tensors(ref), _tensors(out)
    if len(refs) != len(outs):
        return [OutputCheck("output structure", "-", float("inf"), 0.0)]
    checks = []
    for (name, r), (_, o) in zip(refs, outs, strict=True):
        loosest = max(TOLERANCES.get(d, (0.0,))[0] for d in (r.dtype, model_dtype))  # atol
        tol = loosest * factor if r.is_floating_point() else 0.0
        if r.shape != o.shape or r.dtype != o.dtype:
            err = float("inf")
        elif not r.is_floating_point():
            err = 0.0 if torch.equal(r, o) else float("inf")
        elif r.numel() == 0:
            err = 0.0
        else:
            r64, o64 = r.double(), o.double()
            same_nan = torch.equal(r64.isnan(), o64.isnan())
            diff = (r64 - o64).nan_to_num(0.0).abs().max().item()
            scale = max(1.0, r64.nan_to_num(0.0).abs().max().item())
            err = diff / scale if same_nan else float("inf")
        checks.append(OutputCheck(name, dtype_name(r.dtype), err, tol))
    return checks
