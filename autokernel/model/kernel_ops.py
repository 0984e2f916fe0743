"""Optimized kernels as `torch.library` ops: one op per kernel type, routed per call.

Each op (`torch.ops.autokernel.<type>`) has a fake implementation, so a patched model still
traces under torch.compile, where the op stays one opaque node. The real implementation looks
up a Router by the op's `slot` argument: the kernels of that type a Patch loaded, plus call
counters. Routing policy:

- a call the kernel's contract does not cover (a dtype outside fp16/bf16/fp32, mixed dtypes,
  a CPU tensor without the Triton interpreter, a shape the reference rejects) runs the
  reference PyTorch implementation and is counted as a fallback with its reason;
- otherwise the kernel whose plan shapes contain the call's size runs; with no such kernel,
  policy "dtype" (default: a kernel that passed the harness's sweep is correct at any size)
  runs the type's first kernel, policy "plan" falls back (only what was measured runs).

The route depends only on the call's tensor shapes, dtypes and devices, so each Router decides
it once per signature and the op's host time stays near the dispatcher's own.

Kernel files are loaded by path under unique module names, never from the user's cwd.
The ops are inference ops: they have no autograd formula.
"""

from __future__ import annotations

import contextlib
import hashlib
import itertools
import os
import threading
from collections import Counter
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

import torch
from torch.utils._python_dispatch import _get_current_dispatch_mode as _dispatch_mode

if not torch.cuda.is_available():
    # Triton reads this once, when it is first imported (its own tl.sum etc. are jit functions):
    # set it here, before anything imports triton, so kernels run on CPU tensors.
    os.environ.setdefault("TRITON_INTERPRET", "1")

from autokernel import reference
from autokernel.kernel_file import import_file, positional_limit, trimmed
from autokernel.model.kinds import GENERIC_SCHEMA, KINDS, call_size, same_size
from autokernel.specs import DTYPES, GENERIC, KERNEL_TYPES, SPECS
from autokernel.specs.region import Region

NAMESPACE = "autokernel"
Policy = Literal["dtype", "plan"]


class KernelLoadError(Exception):
    """A kernel file that cannot be used: missing, does not import, no kernel_fn or type."""


@dataclass
class LoadedKernel:
    name: str  # the target's name (optimized/<name>.py)
    kernel_type: str
    fn: Callable
    path: Path
    shapes: tuple[Mapping[str, int], ...] = ()  # the plan's real shapes, if known
    region: Region | None = None  # a generic kernel's region (its target's, from the run)
    route: str = ""  # a generic kernel's route key: where in the model it goes
    # How many of the op's arguments kernel_fn takes: fewer than the op passes for a kernel
    # file written before the type gained an optional argument (attention's attn_mask); calls
    # that give it one are then left to PyTorch.
    takes: int | None = None


def load_kernel(path: Path, name: str | None = None, shapes: Sequence = ()) -> LoadedKernel:
    """Import a kernel file by path. On a machine without CUDA, Triton's interpreter is switched
    on first: `triton.jit` reads TRITON_INTERPRET when the kernel module is executed."""
    path = Path(path).resolve()
    if not path.is_file():
        raise KernelLoadError(f"{path}: no such kernel file")
    _check_interpreter()
    digest = hashlib.sha1(str(path).encode()).hexdigest()[:12]
    mod_name = f"autokernel_loaded_{path.stem}_{digest}_{next(_SERIAL)}"
    try:
        module = import_file(path, mod_name)
    except Exception as exc:  # a user's kernel file may raise anything at import
        raise KernelLoadError(f"{path}: import failed: {type(exc).__name__}: {exc}") from exc
    kind, fn = getattr(module, "KERNEL_TYPE", None), getattr(module, "kernel_fn", None)
    if kind not in KERNEL_TYPES:
        raise KernelLoadError(
            f"{path}: KERNEL_TYPE is {kind!r}, not one of {', '.join(KERNEL_TYPES)}"
        )
    if not callable(fn):
        raise KernelLoadError(f"{path}: defines no kernel_fn")
    takes = None if kind == GENERIC else positional_limit(fn, len(SPECS[kind].arg_names))
    if takes is not None:
        fn = trimmed(fn, takes)
    shapes = tuple(dict(s) for s in shapes)
    return LoadedKernel(name or path.stem, kind, fn, path, shapes, takes=takes)


_SERIAL = itertools.count()


def _check_interpreter() -> None:
    """Without CUDA, Triton must have been imported with the interpreter on."""
    if torch.cuda.is_available():
        return
    import triton.language as tl

    if type(tl.sum).__name__ != "InterpretedFunction":
        raise KernelLoadError(
            "no CUDA, and Triton was imported before TRITON_INTERPRET=1 was set: "
            "start again with TRITON_INTERPRET=1 in the environment"
        )


def interpreter_on() -> bool:
    return os.environ.get("TRITON_INTERPRET", "0") not in ("", "0")


def unsupported(kind: str, args: Sequence, region: Region | None = None) -> str | None:
    """Why the kernel contract does not cover this call, or None (then a kernel may run)."""
    if kind == GENERIC:
        return _generic_unsupported(args[0], region)
    tensors = [t for t in args if isinstance(t, torch.Tensor)]
    x = tensors[0]
    if x.dtype not in DTYPES:
        return f"dtype {str(x.dtype).removeprefix('torch.')}"
    if any(t.device != x.device for t in tensors):
        return "tensors on several devices"
    if x.device.type != "cuda" and not (x.device.type == "cpu" and interpreter_on()):
        return f"device {x.device.type} (Triton needs CUDA or TRITON_INTERPRET=1)"
    return KINDS[kind].contract(args)


def _generic_unsupported(xs: Sequence[torch.Tensor], region: Region | None) -> str | None:
    """A generic kernel runs where its traced code holds: the region's dtypes, ranks, size-1
    dims and layout (Region.bind), on a device Triton runs on."""
    if region is None:
        return "no region"
    bound = region.bind(xs)
    if isinstance(bound, str):
        return bound
    devices = {t.device for t in xs}
    if len(devices) > 1:
        return "tensors on several devices"
    (device,) = devices or {torch.device("cpu")}
    if device.type != "cuda" and not (device.type == "cpu" and interpreter_on()):
        return f"device {device.type} (Triton needs CUDA or TRITON_INTERPRET=1)"
    return None


def _label(kind: str, size: Mapping[str, int]) -> str:
    if kind == GENERIC:
        return "x".join(str(v) for v in size.values())
    return SPECS[kind].label(size)


# Tensors lead every op's arguments: how many, per type (the signature a route is cached by).
_N_TENSORS = {kind: side.n_tensors for kind, side in KINDS.items()}
_ROUTE_KEYS = {kind: side.route_key for kind, side in KINDS.items() if side.route_key}

# Shape, dtype and device of the leading tensors, written out: a comprehension over the tensors
# took twice as long (a frame per call, about 3 us on the loaded 2-core CPU).
_SIGNATURES: dict[int, Callable[[Sequence], tuple]] = {
    1: lambda a: (a[0].shape, a[0].dtype, a[0].device),
    2: lambda a: (a[0].shape, a[0].dtype, a[0].device, a[1].shape, a[1].dtype, a[1].device),
    3: lambda a: (
        *(a[0].shape, a[0].dtype, a[0].device, a[1].shape, a[1].dtype, a[1].device),
        *(a[2].shape, a[2].dtype, a[2].device),
    ),
    4: lambda a: (
        *(a[0].shape, a[0].dtype, a[0].device, a[1].shape, a[1].dtype, a[1].device),
        *(a[2].shape, a[2].dtype, a[2].device, a[3].shape, a[3].dtype, a[3].device),
    ),
}


@dataclass
class Route:
    """What a call signature gets: a kernel, or the reference with the reason."""

    kernel: LoadedKernel | None
    reason: str
    clone: bool = False  # the kernel's output shared an input's storage on the first call
    # The strides the op's fake gives, where the kernel's output has others: torch.compile's
    # code asserts the fake's layout, so such an output is copied into it.
    layout: tuple[int, ...] | None = None


@dataclass
class Router:
    """The kernels of one type that a Patch loaded, its routing policy and call counters.

    The route of a call depends only on its tensors' shapes, dtypes and devices (and on the
    kernels and policy), so it is decided once per signature: a model calls the same few
    signatures thousands of times, and deciding anew cost more host time than the launch."""

    kind: str
    kernels: list[LoadedKernel]
    policy: Policy = "dtype"
    calls: Counter = field(default_factory=Counter)  # kernel name -> calls run by it
    fallbacks: Counter = field(default_factory=Counter)  # reason -> calls run by PyTorch
    routes: dict = field(default_factory=dict, repr=False)  # signature -> Route

    @property
    def kernel_calls(self) -> int:
        return sum(self.calls.values())

    def fallback(self, reason: str) -> None:
        """Count a call the patch saw but did not hand to the op (e.g. softmax over dim 0);
        not under torch.compile, where Dynamo would guard on the count (Patch.seen)."""
        if not torch.compiler.is_compiling():
            self.fallbacks[reason] += 1

    @property
    def region(self) -> Region | None:
        return self.kernels[0].region if self.kernels else None

    def choose(self, args: Sequence) -> tuple[LoadedKernel | None, str]:
        reason = unsupported(self.kind, args, self.region)
        if reason:
            return None, reason
        size = self.region.bind(args[0]) if self.kind == GENERIC else call_size(self.kind, args)
        for k in self.kernels:
            if k.takes is not None and any(a is not None for a in args[k.takes :]):
                return None, f"{k.name}.kernel_fn takes no {SPECS[self.kind].arg_names[k.takes]}"
            if any(same_size(self.kind, size, s) for s in k.shapes):
                return k, ""
        if self.policy == "plan":
            return None, f"shape {_label(self.kind, size)} not in the plan"
        return self.kernels[0], ""

    def signature(self, args: Sequence) -> tuple:
        """What the route depends on. The kernels and the policy are in it, so a kernel added
        or a policy changed after the first call is not missed."""
        if self.kind == GENERIC:
            return (len(self.kernels), self.policy,
                    *((t.shape, t.stride(), t.dtype, t.device) for t in args[0]))  # fmt: skip
        key = (len(self.kernels), self.policy, *_SIGNATURES[_N_TENSORS[self.kind]](args))
        extra = _ROUTE_KEYS.get(self.kind)
        return key if extra is None else (*key, *extra(args))

    def __call__(self, *args):
        key = self.signature(args)
        route = self.routes.get(key)
        first = route is None
        if first:
            route = Route(*self.choose(args))
        _STATE.depth += 1
        try:
            if route.kernel is None:
                self.fallbacks[route.reason] += 1
                out = self._reference(args)
            else:
                self.calls[route.kernel.name] += 1
                out = route.kernel.fn(*(args[0] if self.kind == GENERIC else args))
        finally:
            _STATE.depth -= 1
        if first:
            # A custom op's output must not alias its inputs. Whether a kernel's output does is
            # a matter of its call signature (a starter plans it so), and checking each call's
            # storages cost about a microsecond per tensor: checked on a signature's first call.
            tensors = args[0] if self.kind == GENERIC else args[: _N_TENSORS[self.kind]]
            route.clone = any(_shares_storage(out, t) for t in tensors)
            if self.kind != GENERIC:
                want = _FAKES[self.kind](*args, 0).stride()
                route.layout = None if want == out.stride() else want
            if len(self.routes) >= 4096:  # models with ever-changing shapes: start afresh
                self.routes.clear()
            self.routes[key] = route
        if route.layout is not None:
            return torch.empty_strided(out.shape, route.layout, dtype=out.dtype,
                                       device=out.device).copy_(out)  # fmt: skip
        return out.clone() if route.clone else out

    def _reference(self, args: Sequence) -> torch.Tensor:
        if self.kind == GENERIC:
            assert self.region is not None
            return self.region.replay(args[0])  # as the model computes it, in its dtype
        return _REFERENCE[self.kind](*args)


def _shares_storage(a: torch.Tensor, b: torch.Tensor) -> bool:
    return a.untyped_storage().data_ptr() == b.untyped_storage().data_ptr()


_REFERENCE: dict[str, Callable] = {k: getattr(reference, k) for k in reference.KERNEL_TYPES}
_ROUTERS: dict[int, Router] = {}
_SLOTS = itertools.count(1)


class _OpDepth(threading.local):
    depth = 0  # ops running in this thread, nested


_STATE = _OpDepth()


def register(router: Router) -> int:
    """Make the router reachable from the ops; the returned slot goes into every op call."""
    slot = next(_SLOTS)
    _ROUTERS[slot] = router
    return slot


def unregister(slot: int) -> None:
    _ROUTERS.pop(slot, None)


def in_op() -> bool:
    """True while an op runs a kernel or the reference: patched functions must pass through
    (reference.flash_attention itself calls torch.softmax)."""
    return _STATE.depth > 0


@contextlib.contextmanager
def inside_op() -> Iterator[None]:
    _STATE.depth += 1
    try:
        yield
    finally:
        _STATE.depth -= 1


def _route(slot: int, *args):
    router = _ROUTERS.get(slot)
    if router is None:
        raise RuntimeError(f"autokernel op called with slot {slot}, but that patch was removed")
    return router(*args)


# The ops are defined through torch.library.Library rather than torch.library.custom_op: a
# custom_op call runs Python wrappers for autograd, dispatch and an aliasing check on every call
# (about 5x the host time of the plain registration below, timed on the CPU), and a model makes
# thousands of these calls per forward. The implementation is registered for every backend
# (CompositeExplicitAutograd); the fake implementations give torch.compile shapes and dtypes.
_LIB = torch.library.Library(NAMESPACE, "FRAGMENT")

SCHEMAS: dict[str, str] = {kind: side.schema for kind, side in KINDS.items()}
SCHEMAS[GENERIC] = GENERIC_SCHEMA


def _impl(*args):
    """Every op's real implementation: the slot (last argument) names the Router."""
    return _route(args[-1], *args[:-1])


def _generic_fake(xs: list[torch.Tensor], slot: int) -> torch.Tensor:
    """The region's output shape and dtype: its description replayed on the fake inputs."""
    router = _ROUTERS.get(slot)
    if router is None or router.region is None:
        raise RuntimeError(f"autokernel generic op with slot {slot}: no region registered")
    return router.region.replay(xs)


_FAKES: dict[str, Callable] = {kind: side.fake for kind, side in KINDS.items()}
_FAKES[GENERIC] = _generic_fake


def _define(kind: str) -> Callable:
    """Define torch.ops.autokernel.<kind>; return what callers call (see _eager_shortcut)."""
    _LIB.define(kind + SCHEMAS[kind])
    _LIB.impl(kind, _impl, "CompositeExplicitAutograd")
    torch.library.register_fake(f"{NAMESPACE}::{kind}", _FAKES[kind], lib=_LIB)
    return _eager_shortcut(getattr(torch.ops.autokernel, kind).default)


def _eager_shortcut(op: Callable) -> Callable:
    """The op for tracers, its Router for plain eager calls.

    The op exists so torch.compile, export and fake tensors see one node with a shape rule; a
    plain eager call gains nothing from the dispatcher's round trip, which cost about 6 us a
    call on the CPU, more than the launch. is_compiling() comes first: Dynamo folds it to True
    and never traces the dispatch-mode lookup behind it."""

    def call(*args):
        if torch.compiler.is_compiling() or _dispatch_mode() is not None:
            return op(*args)
        return _route(args[-1], *args[:-1])

    call.op = op  # type: ignore[attr-defined]
    return call


OPS: dict[str, Callable] = {kind: _define(kind) for kind in KERNEL_TYPES}


def __getattr__(name: str) -> Callable:
    """`kernel_ops.<type>`: that type's op, as OPS holds it."""
    try:
        return OPS[name]
    except KeyError:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}") from None
