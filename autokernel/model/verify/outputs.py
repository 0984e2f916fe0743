"""Patched outputs judged: against eager's scale, and in half precision against float32 too.

The eager rule: max|patched - eager| / max(1, max|eager|) within the dtype's harness atol times
ACCUMULATION_FACTOR. It is the only rule for a float32 model, and a coarse guard everywhere:
one element far off anywhere fails it. In bf16 it allows ~10 % of the output's scale, far more
than a wrong kernel (SiLU for GELU, a wrong eps) moves the outputs.

The reference rule (bf16/fp16 models, autokernel.model.verify.upcast): the model's exact answer
is its float32 forward; eager's own distance from it is the rounding noise of the model in
this dtype, on these weights and inputs. A right kernel rounds differently but no worse, so
patched must stay within REFERENCE_FACTOR times eager's distance (or one rounding of the
dtype, its epsilon, for outputs eager gets exact). Distances are normwise, ||a - ref|| /
||ref||: a mean over every element is steady from seed to seed, where a maximum is one extreme
draw.

An output passes when every rule that applies passes; the rule reported with it is the one
closest to failing (its margin, tolerance / error, the smallest). A shape, dtype or NaN-pattern
mismatch is an infinite error.
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
# Measured on the CPU (docs/verify-tolerance.md), patched's distance from float32 over eager's,
# with every starter plugged into tiny Llama, Qwen2, Mistral, Phi-3, Gemma, GPT-2 and BERT
# models: right kernels 0.85-1.04x in fp16 and at most 2.5x in bf16, where Triton's interpreter
# truncates float32 to bf16 (twice the rounding error of round-to-nearest, all one way); wrong
# kernels that move the outputs by more than the dtype's own noise 3.9x to 400x.
REFERENCE_FACTOR = 4.0

EAGER, REFERENCE = "eager", "fp32-reference"


@dataclass
class OutputCheck:
    name: str
    dtype: str
    error: float  # the judging rule's error; inf for a shape, dtype or NaN mismatch
    tolerance: float
    rule: str = EAGER  # which rule judged it: the one closest to failing
    eager_error: float | None = None  # reference rule: eager's own distance from float32

    @property
    def ok(self) -> bool:
        return self.error <= self.tolerance

    @property
    def margin(self) -> float:
        """tolerance / error: above 1 passes, and by how much; inf for an exact output."""
        if self.error == 0:
            return float("inf")
        return self.tolerance / self.error


def _tensors(obj: Any, name: str = "output") -> list[tuple[str, torch.Tensor]]:
    if isinstance(obj, torch.Tensor):
        return [(name, obj)]
    if isinstance(obj, dict):
        return [t for k, v in obj.items() for t in _tensors(v, f"{name}.{k}")]
    if isinstance(obj, (list, tuple)):
        return [t for i, v in enumerate(obj) for t in _tensors(v, f"{name}[{i}]")]
    return []


def _mismatch(r: torch.Tensor, o: torch.Tensor) -> bool:
    """Shapes, dtypes or where the NaNs are differ: no error size means anything then."""
    if r.shape != o.shape or r.dtype != o.dtype:
        return True
    return r.is_floating_point() and not torch.equal(r.isnan(), o.isnan())


def _scaled_max(ref: torch.Tensor, out: torch.Tensor) -> float:
    r64, o64 = ref.double(), out.double()
    diff = (r64 - o64).nan_to_num(0.0).abs().max().item()
    return diff / max(1.0, r64.nan_to_num(0.0).abs().max().item())


def normwise(ref: torch.Tensor, out: torch.Tensor) -> float:
    """||out - ref|| / ||ref|| over the finite elements (an all-zero ref: the absolute norm)."""
    r64, o64 = ref.double(), out.double()
    keep = r64.isfinite() & o64.isfinite()
    r64, o64 = r64[keep], o64[keep]
    if not torch.equal(r64.isinf(), o64.isinf()) or r64.numel() == 0:
        return 0.0 if r64.numel() == 0 else float("inf")
    scale = r64.norm().item()
    return (o64 - r64).norm().item() / (scale if scale > 0 else 1.0)


def compare(
    ref: Any, out: Any, model_dtype: torch.dtype, factor: float, exact: Any = None
) -> list[OutputCheck]:
    """Every tensor in the outputs: the eager rule, and the reference rule where `exact` (the
    model's float32 outputs) is given. `ref` is the eager output."""
    refs, outs = _tensors(ref), _tensors(out)
    if len(refs) != len(outs):
        return [OutputCheck("output structure", "-", float("inf"), 0.0)]
    exacts = _tensors(exact) if exact is not None else []
    if len(exacts) != len(refs):
        exacts = [(n, None) for n, _ in refs]
    checks = []
    for (name, r), (_, o), (_, x) in zip(refs, outs, exacts, strict=True):
        check = _eager_check(name, r, o, model_dtype, factor)
        if x is not None and check.error != float("inf") and r.is_floating_point() and r.numel():
            by_ref = _reference_check(name, r, o, x, model_dtype)
            if by_ref is not None and by_ref.margin <= check.margin:
                check = by_ref
        checks.append(check)
    return checks


def _eager_check(
    name: str, r: torch.Tensor, o: torch.Tensor, model_dtype: torch.dtype, factor: float
) -> OutputCheck:
    loosest = max(TOLERANCES.get(d, (0.0,))[0] for d in (r.dtype, model_dtype))  # atol
    tol = loosest * factor if r.is_floating_point() else 0.0
    if _mismatch(r, o):
        err = float("inf")
    elif not r.is_floating_point():
        err = 0.0 if torch.equal(r, o) else float("inf")
    elif r.numel() == 0:
        err = 0.0
    else:
        err = _scaled_max(r, o)
    return OutputCheck(name, dtype_name(r.dtype), err, tol)


def _reference_check(
    name: str, r: torch.Tensor, o: torch.Tensor, x: torch.Tensor, model_dtype: torch.dtype
) -> OutputCheck | None:
    """Patched's distance from float32 against eager's; None where the float32 output is not
    comparable (another shape: the model's forward depends on its dtype)."""
    if x.shape != r.shape or not x.is_floating_point():
        return None
    eager_err, err = normwise(x, r), normwise(x, o)
    if eager_err == float("inf"):
        return None  # eager itself overflows where float32 does not: no noise level to use
    floor = max(_one_rounding(d) for d in (r.dtype, model_dtype))
    tol = max(REFERENCE_FACTOR * eager_err, floor)
    return OutputCheck(name, dtype_name(r.dtype), err, tol, REFERENCE, eager_err)


def _one_rounding(dtype: torch.dtype) -> float:
    """The gap between 1 and the next number: the largest relative error of one rounding in
    either direction (round-to-nearest errs by half of it, truncation by up to all of it)."""
    return torch.finfo(dtype).eps if dtype.is_floating_point else 0.0
