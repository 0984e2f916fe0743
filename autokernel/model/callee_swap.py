"""Torch calls routed in an eager forward by swapping the attributes that name the claimed
callees, not by a TorchFunctionMode.

Why: a mode puts every torch call of the forward through Python (views, shape reads, adds, the
Linears), a few µs each and hundreds per layer: patching one RMSNorm made the whole eager
forward pay for all of them (measured on a 2-core CPU: a Tensor.view 0.9 µs plain, 10.7 µs
under an empty mode). A swapped attribute costs only the calls it names. torch.compile still
traces through the mode (autokernel.model.patching), where the cost is paid once.

Swaps are process-wide and counted: the first active forward installs a callee's wrapper, the
last one out restores the original. The wrapper routes only in a thread whose innermost active
forward claimed the callee; anywhere else (another thread, code outside a patched forward,
inside a kernel) it calls the original, so torch behaves as before.

A callee written in Python (F.log_softmax, F.normalize, F.layer_norm) first hands its call to
handle_torch_function with its arguments rearranged and its defaults filled in
(`F.log_softmax(x, dim=0)` reaches a mode as `(x,), {dim: 0, _stacklevel: 3, dtype: None}`).
Profile recorded that form in the plan's routes, so the wrapper lets such a callee make that
hand-off and routes what it hands over; the call site's own form would match no route.
"""

from __future__ import annotations

import contextlib
import functools
import threading
import types
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import torch
from torch.overrides import TorchFunctionMode

from autokernel.model import kernel_ops

Router = Callable[[Callable, tuple, dict], Any]  # (original callee, args, kwargs) -> result

_LOCK = threading.Lock()


@dataclass
class _Swap:
    container: Any  # a module or class (attribute), or a dict (a model module's globals)
    name: str
    original: Callable
    had_own: bool  # the attribute was the container's own (restore it) or inherited (delete)
    routed_as: Callable  # the callee the router is told of (the method an operator stands for)
    users: int = 0


_SWAPS: dict[tuple[int, str], _Swap] = {}
_ORIGINALS: dict[int, Callable] = {}  # id(wrapper) -> the callee it stands for


class _Active(threading.local):
    def __init__(self) -> None:
        self.routers: list[Router] = []


_ACTIVE = _Active()


Place = tuple[Any, str, str | None]  # container, attribute, the tensor method it stands for


def places_of(name: str) -> list[Place]:
    """Where a call name is reached: 'torch.nn.functional.gelu' -> its attribute of
    torch.nn.functional; 'Tensor.add' -> torch.Tensor.add and the operators that reach a
    TorchFunctionMode as Tensor.add (x + y, 2 + x). Empty if not reachable."""
    head, _, attr = name.rpartition(".")
    parts = head.split(".")
    obj: Any = torch.Tensor if parts[0] == "Tensor" else (torch if parts[0] == "torch" else None)
    for part in parts[1:]:
        obj = getattr(obj, part, None)
    if obj is None or not attr:
        return []
    places: list[Place] = [(obj, attr, None)]
    if obj is torch.Tensor:
        places += [(obj, op, attr) for op in operator_aliases().get(attr, ())]
    return places


_BINARY = (
    "__add__", "__radd__", "__iadd__", "__sub__", "__rsub__", "__isub__", "__mul__", "__rmul__",
    "__imul__", "__truediv__", "__rtruediv__", "__itruediv__", "__floordiv__", "__rfloordiv__",
    "__mod__", "__rmod__", "__pow__", "__rpow__", "__ipow__", "__matmul__", "__rmatmul__",
    "__eq__", "__ne__", "__lt__", "__le__", "__gt__", "__ge__", "__and__", "__rand__", "__or__",
    "__ror__", "__xor__", "__rxor__", "__lshift__", "__rshift__",
)  # fmt: skip
_UNARY = ("__neg__", "__pos__", "__abs__", "__invert__")


@functools.cache
def operator_aliases() -> dict[str, tuple[str, ...]]:
    """Tensor method -> the operator methods a TorchFunctionMode sees as that method with the
    same arguments (x + y and 2 + x arrive as Tensor.add(x, ...)), asked of torch itself once:
    profile records calls through a mode, so an operator is planned under the method's name."""
    from autokernel.model.calls import api_name

    class First(TorchFunctionMode):
        def __init__(self) -> None:
            super().__init__()
            self.seen: tuple[str, tuple] | None = None

        def __torch_function__(self, func, types, args=(), kwargs=None):
            if self.seen is None:
                self.seen = (api_name(func), tuple(args))
            return func(*args, **(kwargs or {}))

    found: dict[str, list[str]] = {}
    operands = [torch.ones(2, 2), torch.ones(2, 2, dtype=torch.int64), torch.ones(2, dtype=bool)]
    for op in (*_BINARY, *_UNARY):
        for x in operands:
            args = (x.clone(),) if op in _UNARY else (x.clone(), x.clone())
            first = First()
            try:
                with first:
                    getattr(args[0], op)(*args[1:])
            except Exception:  # not defined for this dtype: the next operands
                continue
            if first.seen is not None:
                name, seen = first.seen
                method = name.removeprefix("Tensor.")
                same = len(seen) == len(args) and all(
                    a is b for a, b in zip(seen, args, strict=True)
                )
                if name.startswith("Tensor.") and method != op and same:
                    found.setdefault(method, []).append(op)
            break
    return {m: tuple(ops) for m, ops in found.items()}


def original(obj: Any) -> Any:
    """The callee a wrapper stands for (obj itself when it is none of ours)."""
    return _ORIGINALS.get(id(obj), obj)


def dispatches(callee: Callable) -> bool:
    """Whether a callee is Python, which may hand its call to handle_torch_function itself or
    through a helper (F.max_pool2d's boolean dispatch reaches a mode from _max_pool2d, named
    as max_pool2d): its arguments as a mode sees them may differ from the call site's."""
    return isinstance(callee, types.FunctionType)


class _HandOff(TorchFunctionMode):
    """Routes the first call of `callee` that reaches a mode, in the form it arrives there; a
    callee that never hands off runs as written."""

    def __init__(self, router: Router, callee: Callable, routed_as: Callable) -> None:
        super().__init__()
        self.router, self.callee, self.routed_as = router, callee, routed_as
        self.pending = True

    def __torch_function__(self, func, types, args=(), kwargs=None):
        if self.pending and original(func) is self.callee:
            self.pending = False
            return self.router(self.routed_as, tuple(args), dict(kwargs or {}))
        return func(*args, **(kwargs or {}))


def _wrapper(callee: Callable, routed_as: Callable) -> Callable:
    hand_off = dispatches(callee)

    def routed(*args: Any, **kwargs: Any) -> Any:
        routers = _ACTIVE.routers
        if not routers or kernel_ops.in_op():
            return callee(*args, **kwargs)
        if hand_off:
            with _HandOff(routers[-1], callee, routed_as):
                return callee(*args, **kwargs)
        return routers[-1](routed_as, args, kwargs)

    routed.__wrapped__ = callee  # type: ignore[attr-defined]
    routed.__name__ = getattr(callee, "__name__", "routed")
    routed.__doc__ = getattr(callee, "__doc__", None)
    _ORIGINALS[id(routed)] = callee
    return routed


def _get(container: Any, name: str) -> tuple[Any, bool]:
    if isinstance(container, dict):
        return container.get(name), True
    own = name in vars(container)
    return (vars(container)[name] if own else getattr(container, name, None)), own


def _set(swap: _Swap, value: Any | None) -> None:
    if isinstance(swap.container, dict):
        swap.container[swap.name] = value if value is not None else swap.original
    elif value is not None:
        setattr(swap.container, swap.name, value)
    elif swap.had_own:
        setattr(swap.container, swap.name, swap.original)
    else:
        delattr(swap.container, swap.name)


def _acquire(places: Sequence[Place]) -> list[_Swap]:
    taken = []
    with _LOCK:
        for container, name, stands_for in places:
            key = (id(container), name)
            swap = _SWAPS.get(key)
            if swap is None:
                current, own = _get(container, name)
                if current is None:
                    continue
                routed_as = original(getattr(container, stands_for)) if stands_for else None
                swap = _Swap(container, name, original(current), own,
                             routed_as or original(current))  # fmt: skip
                _SWAPS[key] = swap
            if swap.users == 0:
                _set(swap, _wrapper(swap.original, swap.routed_as))
            swap.users += 1
            taken.append(swap)
    return taken


def _release(taken: list[_Swap]) -> None:
    with _LOCK:
        for swap in taken:
            swap.users -= 1
            if swap.users == 0:
                wrapper, _ = _get(swap.container, swap.name)
                _ORIGINALS.pop(id(wrapper), None)
                _set(swap, None)
                del _SWAPS[(id(swap.container), swap.name)]


@contextlib.contextmanager
def routed(places: Sequence[Place], router: Router) -> Iterator[None]:
    """While the block runs, calls through `places` in this thread go to `router` with the
    original callee (for an operator, the method it stands for)."""
    taken = _acquire(places)
    _ACTIVE.routers.append(router)
    try:
        yield
    finally:
        _ACTIVE.routers.pop()
        _release(taken)
