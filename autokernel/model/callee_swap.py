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
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import torch

from autokernel.model import kernel_ops

Router = Callable[[Callable, tuple, dict], Any]  # (original callee, args, kwargs) -> result

_LOCK = threading.Lock()


@dataclass
class _Swap:
    container: Any  # a module or class (attribute), or a dict (a model module's globals)
    name: str
    original: Callable
    had_own: bool  # the attribute was the container's own (restore it) or inherited (delete)
    users: int = 0


_SWAPS: dict[tuple[int, str], _Swap] = {}
_ORIGINALS: dict[int, Callable] = {}  # id(wrapper) -> the callee it stands for


class _Active(threading.local):
    def __init__(self) -> None:
        self.routers: list[Router] = []


_ACTIVE = _Active()


def owner_of(name: str) -> tuple[Any, str] | None:
    """Where a call name lives: 'Tensor.softmax' -> (torch.Tensor, 'softmax'),
    'torch.nn.functional.gelu' -> (torch.nn.functional, 'gelu'); None if not reachable."""
    head, _, attr = name.rpartition(".")
    parts = head.split(".")
    obj: Any = torch.Tensor if parts[0] == "Tensor" else (torch if parts[0] == "torch" else None)
    for part in parts[1:]:
        obj = getattr(obj, part, None)
    return (obj, attr) if obj is not None and attr else None


def original(obj: Any) -> Any:
    """The callee a wrapper stands for (obj itself when it is none of ours)."""
    return _ORIGINALS.get(id(obj), obj)


def _wrapper(callee: Callable) -> Callable:
    def routed(*args: Any, **kwargs: Any) -> Any:
        routers = _ACTIVE.routers
        if not routers or kernel_ops.in_op():
            return callee(*args, **kwargs)
        return routers[-1](callee, args, kwargs)

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


def _acquire(places: Sequence[tuple[Any, str]]) -> list[_Swap]:
    taken = []
    with _LOCK:
        for container, name in places:
            key = (id(container), name)
            swap = _SWAPS.get(key)
            if swap is None:
                current, own = _get(container, name)
                if current is None:
                    continue
                swap = _Swap(container, name, original(current), own)
                _SWAPS[key] = swap
            if swap.users == 0:
                _set(swap, _wrapper(swap.original))
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
def routed(places: Sequence[tuple[Any, str]], router: Router) -> Iterator[None]:
    """While the block runs, calls through `places` (containers and attribute names) in this
    thread go to `router` with the original callee."""
    taken = _acquire(places)
    _ACTIVE.routers.append(router)
    try:
        yield
    finally:
        _ACTIVE.routers.pop()
        _release(taken)
