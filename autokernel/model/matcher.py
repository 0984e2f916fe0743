"""The one matcher: which module, torch call or model function is which kernel type.

profile labels what it claims (so the time inside is one target of that type) and verify
replaces exactly the same things, so every target a plan holds is one verify can plug in. What
each type claims is its spec's model side (autokernel/specs/*_model.py): torch calls by the
callee's name, whole modules, the model's own functions. A call outside a type's semantics
(softmax over dim 0, a sum over a middle dim, an attention with a mask) is no match at all, so
it can be a generic target instead. Modules and functions matched by duck typing (an RMSNorm
without the name, a SwiGLU MLP, a rotary function) are probed once on a tiny input against
reference.py, here: a module computing something else (Gemma's 1 + weight, a GELU MLP) is not
that type, with a note.
"""

from __future__ import annotations

import types
import weakref
from collections.abc import Callable

import torch
from torch import nn

from autokernel.model.calls import api_name, tensors_of
from autokernel.model.kinds import CALL_NOTES, CALLS, KINDS
from autokernel.model.match import Match
from autokernel.specs.model_side import floating

PROBE_TOL = {torch.float32: 1e-4, torch.float64: 1e-9}  # else 2e-2 (half types)

_PROBED: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()  # module/function -> note


def _close(a: torch.Tensor, b: torch.Tensor) -> bool:
    """Equal up to the dtype's rounding, relative to the reference's scale. Not with an
    absolute floor: a module with small random weights (a config built without a checkpoint)
    has outputs far below 1, where a floor of 2e-2 (bf16) let a GELU MLP pass for SwiGLU."""
    if a.shape != b.shape:
        return False
    if b.numel() == 0:
        return True
    tol = PROBE_TOL.get(a.dtype, 2e-2)
    err, scale = (a.double() - b.double()).abs().max(), b.double().abs().max()
    return bool(err <= tol * scale)  # NaN compares False


def probe(owner: object, run: Callable[[], tuple[torch.Tensor, torch.Tensor]], what: str) -> str:
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


def match_call(func: Callable, args: tuple, kwargs: dict, name: str | None = None) -> Match | None:
    """The kernel type of a torch call, by the callee's name (given where it is known already:
    verify's router looks callees up by identity, which torch.compile traces)."""
    name = name or api_name(func)
    entry = CALLS.get(name)
    if entry is None:
        return None
    kind, matcher = entry
    return Match.of(kind, matcher(name, args, kwargs))


def call_note(func: Callable, args: tuple, kwargs: dict, name: str | None = None) -> str:
    """Why a torch call the matcher did not claim is left to PyTorch ('' where its type has
    nothing to say): a batched product whose operands both differ per batch."""
    entry = CALL_NOTES.get(name or api_name(func))
    if entry is None:
        return ""
    kind, note = entry
    why = note(name or api_name(func), args, kwargs)
    return f"not a {kind} target: {why}" if why else ""


class DeclinedCalls:
    """Verify's notes of why calls by a loaded type's callee names stayed PyTorch's (a batched
    product with per-batch operands), so the user sees why a bmm ran as before: once per
    callee and shapes, and a few at most, as a long-lived install sees new shapes forever."""

    LIMIT = 32  # (callee, shapes) pairs looked at

    def __init__(self, notes: list[str]) -> None:
        self.notes = notes
        self.seen: set[tuple] = set()

    def note(self, name: str, func: Callable, args: tuple, kwargs: dict) -> None:
        if len(self.seen) >= self.LIMIT:
            return
        shapes = tuple(tuple(t.shape) for t in tensors_of(args, kwargs))
        if (name, shapes) in self.seen:
            return
        self.seen.add((name, shapes))
        why = call_note(func, args, kwargs, name)
        if why:
            shown = ", ".join("x".join(map(str, s)) for s in shapes)
            self.notes.append(f"{name} ({shown}): left to PyTorch: {why}")


def module_kind(m: nn.Module) -> tuple[str | None, str]:
    """(the type a module computes as a whole, or None; why a likely one was not matched).
    The first type whose entry recognizes the module decides; duck-typed ones are probed."""
    for kind, side in KINDS.items():
        if side.module is None:
            continue
        note = side.module.claim(m, probe)
        if note is not None:
            return (kind, "") if note == "" else (None, note)
    return None, ""


def match_module(m: nn.Module, args: tuple, kwargs: dict, kind: str | None = None) -> Match | None:
    """The type a module's forward computes as a whole, for this call, or None. `kind`: the
    module's type when the caller decided it already (verify's patch, at install): deciding it
    again walked every type's claim per call, a third of the patched forward's routing time
    (tiny HF Llama on the CPU, cProfile)."""
    if kind is None:
        kind, _ = module_kind(m)
    x = args[0] if args else next(iter(kwargs.values()), None)
    if kind is None or len(args) + len(kwargs) != 1:  # the types' modules take one tensor
        return None
    if not floating(x) or x.dim() == 0:
        return None
    return Match.of(kind, KINDS[kind].module.match(m, x))  # type: ignore[union-attr]


def owned_modules(m: nn.Module) -> tuple[nn.Module, ...]:
    """Submodules a claim of `m` takes over (a SwiGLU MLP's Linears): patching leaves them."""
    return tuple(c for side in KINDS.values() if side.module for c in side.module.owns(m))


def likely_kinds(m: nn.Module) -> set[str]:
    """Types a module looks like by its name or parts, matched or not (verify notes why not)."""
    return {k for k, side in KINDS.items() if side.module and side.module.likely(m)}


def function_kinds(fn: types.FunctionType | None = None) -> set[str]:
    """Types the model's own functions can compute; given `fn`, those that could claim it
    (judged from the function alone, before any call)."""
    return {
        k for k, side in KINDS.items()
        if side.function is not None and (fn is None or side.function_may_claim(fn))
    }  # fmt: skip


def match_function(fn: types.FunctionType, args: tuple, kwargs: dict) -> Match | None:
    """The type a model function's call computes (a rotary helper), or None."""
    for kind, side in KINDS.items():
        if side.function is not None:
            match = Match.of(kind, side.function(fn, args, kwargs, probe))
            if match is not None:
                return match
    return None
