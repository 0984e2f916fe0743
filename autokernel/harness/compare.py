"""Compare a kernel's output with the float64 reference, and say where it is worst.

The rule: |got - expected| <= atol + rtol * |expected| elementwise, with (atol, rtol) from the
dtype; non-finite values must match the reference exactly (NaN where NaN, the same infinity),
and wherever the reference is finite the output must be too.
"""

from __future__ import annotations

import torch

from autokernel.harness.verdict import Mismatch


def shape_dtype_error(got: object, expected: torch.Tensor, out_dtype: torch.dtype) -> str | None:
    if not isinstance(got, torch.Tensor):
        return f"kernel_fn returned {type(got).__name__}, expected a torch.Tensor"
    if tuple(got.shape) != tuple(expected.shape):
        return f"output shape {tuple(got.shape)} != expected {tuple(expected.shape)}"
    if got.dtype != out_dtype:
        return f"output dtype {got.dtype} != expected {out_dtype}"
    if got.device != expected.device:
        return f"output on {got.device}, inputs on {expected.device}"
    return None


def compare(got: torch.Tensor, expected: torch.Tensor, atol: float, rtol: float) -> Mismatch | None:
    """None when every element is within tolerance; else the worst element and a count."""
    g = got.detach().to(torch.float64)
    e = expected.to(torch.float64)
    allowed = atol + rtol * e.abs()
    finite_e = torch.isfinite(e)
    err = (g - e).abs()
    bad = torch.where(finite_e, ~(err <= allowed), ~_same_nonfinite(g, e))
    n_bad = int(bad.sum())
    if n_bad == 0:
        return None
    # Worst = largest error relative to what was allowed; non-finite mismatches rank first.
    score = torch.where(
        finite_e & torch.isfinite(g), err / allowed, torch.full_like(err, float("inf"))
    )
    score = torch.where(bad, score, torch.full_like(score, -1.0))
    flat = int(torch.argmax(score.reshape(-1)))
    index = [int(i) for i in torch.unravel_index(torch.tensor(flat), e.shape)] if e.dim() else []
    ok_err = torch.where(finite_e & torch.isfinite(g), err, torch.zeros_like(err))
    rel = ok_err / e.abs().clamp_min(1e-30)
    return Mismatch(
        max_abs_err=float(ok_err.max()) if n_bad else 0.0,
        max_rel_err=float(torch.where(finite_e, rel, torch.zeros_like(rel)).max()),
        index=index,
        got=float(g.reshape(-1)[flat]),
        expected=float(e.reshape(-1)[flat]),
        n_bad=n_bad,
        n_total=e.numel(),
    )


def _same_nonfinite(g: torch.Tensor, e: torch.Tensor) -> torch.Tensor:
    return (torch.isnan(g) & torch.isnan(e)) | (g == e)


def describe(m: Mismatch, atol: float, rtol: float) -> str:
    """One line an agent can act on: how many, how bad, where, what was expected."""
    where = f"at index {tuple(m.index)}" if m.index else "(scalar)"
    return (
        f"{m.n_bad}/{m.n_total} elements outside atol={atol:g} rtol={rtol:g}; "
        f"worst {where}: got {m.got:.6g}, expected {m.expected:.6g} "
        f"(max abs err {m.max_abs_err:.3g}, max rel err {m.max_rel_err:.3g})"
    )
