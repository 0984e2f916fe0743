"""The model side of a kernel type: how profile finds it in a model and verify calls its kernel.

A KernelSpec says how the harness judges a kernel; its ModelSide says everything per type that
profile, attribution and verify need: the custom op's contract (torch.library schema, the fake
implementation torch.compile traces with, which calls the kernel covers), how a call's size is
written in the spec's dims, and what the one matcher (autokernel.model.matcher) may claim for
the type: torch calls by name, modules, the model's own functions, aten ops in a profile,
Inductor's kernels by name. The model layer only reads these entries, so a new kernel type
is its spec, its reference, its starter and its test.

A claim found here carries no type name: the matcher knows which type's entry produced it.
"""

from __future__ import annotations

import types
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

import torch
from torch import nn

Size = dict[str, int]
Outputs = list[torch.Tensor]


def first(outs: Outputs) -> torch.Tensor:
    return outs[0]


@dataclass
class Claim:
    """What a call is, as the type's op takes it, and how its output becomes the original's."""

    op_args: tuple  # the custom op's arguments, the slot left out
    args: dict[str, object] = field(default_factory=dict)  # what plan.yaml keeps: eps, causal
    finish: Callable[[Outputs], Any] = first  # op outputs -> what the original returned
    more: tuple[tuple, ...] = ()  # further calls of the op (the k of a (q, k) rotary)


# probe(owner, run, what) -> '' when `run()` gives (got, want) that agree, else why not. The
# matcher passes its own (cached per owner, run with the ops switched off).
Probe = Callable[[object, Callable[[], tuple[torch.Tensor, torch.Tensor]], str], str]
# (the callee's name, args, kwargs) -> the claim, or None when the call is outside the type
CallMatch = Callable[[str, tuple, dict], Claim | None]
# (the callee's name, args, kwargs) -> why a call by one of a type's names is left to PyTorch
# (a batched product with a per-batch right operand), or None: profile and verify say it, so
# no such call is an unexplained 'other' row
CallNote = Callable[[str, tuple, dict], str | None]
# a profiler event of an aten op -> (size in the spec's dims, plan arguments), or None
AtenParse = Callable[[Any], tuple[Size, dict[str, object]] | None]


def _nothing(m: nn.Module) -> tuple[nn.Module, ...]:
    return ()


def _never(m: nn.Module) -> bool:
    return False


@dataclass(frozen=True)
class ModuleSide:
    """Modules the matcher may claim whole for the type (their forward becomes the op)."""

    # None: not this type's kind of module; '': it is one; else why it looks like one but is not
    claim: Callable[[nn.Module, Probe], str | None]
    # the call of a claimed module on its one floating tensor; None when this call is not one
    match: Callable[[nn.Module, torch.Tensor], Claim | None]
    owns: Callable[[nn.Module], tuple[nn.Module, ...]] = _nothing  # submodules it takes over
    likely: Callable[[nn.Module], bool] = _never  # by name or parts: verify says why it was not


FunctionMatch = Callable[[types.FunctionType, tuple, dict, Probe], Claim | None]


def dense_contract(args: Sequence) -> str | None:
    """Why an op call with tensors of one dtype and a non-empty last dim is not covered."""
    tensors = [t for t in args if isinstance(t, torch.Tensor)]
    x = tensors[0]
    if any(t.dtype != x.dtype for t in tensors[1:]):
        return "mixed dtypes"
    if x.dim() == 0 or x.shape[-1] == 0:
        return "empty last dim"
    return None


def planned_subset(call: Mapping[str, int], planned: Mapping[str, int]) -> bool:
    """A plan's shape names the call when every dim both name agrees."""
    return all(planned[k] == v for k, v in call.items() if k in planned)


@dataclass(frozen=True)
class ModelSide:
    schema: str  # torch.library schema after the op's name; the last argument is the slot
    n_tensors: int  # tensors leading the arguments (a call's route is cached by them)
    fake: Callable[..., torch.Tensor]  # output shape and dtype, no data
    size: Callable[[Sequence], Size]  # an op call's size in the spec's dims
    where: str  # what verify looks for in a model, for "nothing matched"
    calls: Mapping[str, CallMatch] = field(default_factory=dict)  # by calls.api_name
    notes: Mapping[str, CallNote] = field(default_factory=dict)  # names of `calls` it declines
    module: ModuleSide | None = None
    function: FunctionMatch | None = None  # the model's own module-level functions
    # Which of the model's functions `function` could ever claim, from the function alone (its
    # signature): verify wraps only those, as every wrapped function costs each call a frame
    # and a match (GPT-2's 31 functions, all wrapped, cost about 100 us per CPU forward).
    function_may_claim: Callable[[types.FunctionType], bool] = lambda fn: True
    aten: Mapping[str, AtenParse] = field(default_factory=dict)  # attribution by aten name
    # Substrings of Inductor's kernel names that say a compiled kernel computes the type; where
    # one fused kernel's name holds several types' substrings, the lowest rank claims it.
    inductor_names: tuple[str, ...] = ()
    inductor_rank: int = 0
    # How the compiled model's time for a target is found: by the aten op's shape (a GEMM
    # Inductor leaves to cuBLAS), by Inductor's kernel names, or as the whole forward's ratio.
    compiled: Literal["shape", "names", "ratio"] = "ratio"
    # Why an op call with the types' dtype and device is outside what the kernel takes, or None
    contract: Callable[[Sequence], str | None] = dense_contract
    same_size: Callable[[Mapping[str, int], Mapping[str, int]], bool] = planned_subset
    # What a call's route depends on beyond the leading tensors' shapes, dtypes and devices
    # (an optional tensor such as attention's mask), or None when nothing does.
    route_key: Callable[[Sequence], tuple] | None = None


# ---- helpers the types' entries share ----------------------------------------------------------


def floating(*ts: object) -> bool:
    return all(isinstance(t, torch.Tensor) and t.is_floating_point() for t in ts)


def bind(names: tuple[str, ...], args: tuple, kwargs: dict) -> dict | None:
    """Arguments by name, for a callee whose positional order is `names` (Tensor methods: self
    first); None when a keyword is not one of them."""
    bound = dict(zip(names, args, strict=False))
    for k, v in kwargs.items():
        if k not in names or k in bound:
            return None
        bound[k] = v
    return bound


def last_dim(dim: object, ndim: int) -> bool:
    """`dim` (an int or a one-element list) names the last of `ndim` dims."""
    if isinstance(dim, list | tuple):
        if len(dim) != 1:
            return False
        dim = dim[0]
    return isinstance(dim, int) and ndim > 0 and dim in (-1, ndim - 1)


def like(x: torch.Tensor, *_args: object) -> torch.Tensor:
    """The fake output of an op whose result is shaped as its first input."""
    return torch.empty_like(x, memory_format=torch.contiguous_format)


def concrete(event: Any, index: int) -> object:
    """A profiled aten op's scalar argument, where the profiler recorded it."""
    values = getattr(event, "concrete_inputs", None) or []
    return values[index] if index < len(values) else None
