"""Under Triton's interpreter, every load, store and atomic of a kernel stays inside the storage of
one of its launch's tensor arguments.

Why: the interpreter runs a kernel on the CPU by dereferencing its pointers as raw host addresses
of the process running it (numpy arrays of uint64 handed to libtriton's load and store). A
pointer is an integer the kernel can compute: `id(obj)` cast with `.to(tl.pointer_type(...))`,
or an offset from an argument to another object's address. A kernel that does so reads and
writes any byte of the worker (a module's dictionary, the op monitor's records), which is the
static guard's whole premise gone: with it, the file can fetch `os` into one of its own lists
without naming it. A GPU kernel's addresses are the device's own, so this exists only here.

The check: at each launch, the storages of the tensors it was handed (through tuples, wrappers
and tensor descriptors) are the only ranges its unmasked accesses may touch. An access outside
them raises before any byte moves, and is recorded, so a kernel that catches the exception is
still reported (serve.py asks `first_violation` after each call). An honest kernel only ever
touches its arguments; an unmasked tail that reads past its tensor fails here instead of
returning whatever lay beyond.
"""

from __future__ import annotations

import functools
from typing import Any

import numpy as np
import torch

INSTALLED: list[bool] = []
_LAUNCHES: list[list[tuple[int, int]]] = []  # per nested launch: [(first byte, end), ...]
_VIOLATIONS: list[str] = []  # what the candidate did, in order; read by serve.py


class OutsideArguments(RuntimeError):
    """A kernel's access that lies outside every tensor argument of its launch."""


def first_violation() -> str | None:
    """The first out-of-bounds access since this process started, or None."""
    return _VIOLATIONS[0] if _VIOLATIONS else None


def _ranges(args: Any, out: list[tuple[int, int]]) -> None:
    """The storage ranges of every tensor in a launch's (host-side) arguments."""
    from triton.runtime.jit import TensorWrapper
    from triton.tools.tensor_descriptor import TensorDescriptor

    stack = [args]
    while stack:
        arg = stack.pop()
        if isinstance(arg, TensorWrapper):
            stack.append(arg.base)
        elif isinstance(arg, TensorDescriptor):
            stack.append(arg.base)
        elif isinstance(arg, tuple | list):
            stack.extend(arg)
        elif isinstance(arg, dict):
            stack.extend(arg.values())
        elif isinstance(arg, torch.Tensor):
            # the class's own method: a subclass could answer with any address
            storage = torch.Tensor.untyped_storage(arg)
            start = storage.data_ptr()
            out.append((start, start + storage.nbytes()))


def _check(ptrs: Any, mask: Any, what: str) -> None:
    """Raise OutsideArguments unless every address of ptrs that mask enables lies wholly inside
    one of the current launch's argument storages."""
    from triton.runtime.interpreter import _get_np_dtype

    addresses = np.asarray(ptrs.data, dtype=np.uint64)
    if mask is not None:
        addresses = addresses[np.broadcast_to(np.asarray(mask.data, dtype=bool), addresses.shape)]
    if addresses.size == 0:
        return
    itemsize = np.dtype(_get_np_dtype(ptrs.get_element_ty())).itemsize
    inside = np.zeros(addresses.shape, dtype=bool)
    for start, end in _LAUNCHES[-1] if _LAUNCHES else ():
        if end - start >= itemsize:
            inside |= (addresses >= start) & (addresses <= end - itemsize)
    if inside.all():
        return
    address = int(addresses[~inside].flat[0])
    message = (f"a {what} at address {address:#x} lies outside every tensor argument of the "
               "launch (out of bounds: mask it, or pass the tensor it belongs to)")  # fmt: skip
    _VIOLATIONS.append(message)
    raise OutsideArguments(message)


def install() -> None:
    """Wrap the interpreter's launch and memory operations; idempotent. Call before any kernel
    file is imported (a file may launch at its top level)."""
    if INSTALLED:
        return
    from triton.runtime import interpreter

    executor, builder = interpreter.GridExecutor, interpreter.InterpreterBuilder
    init_args, call = executor._init_args_hst, executor.__call__

    @functools.wraps(call)
    def launch(self, *args, **kwargs):
        _LAUNCHES.append([])
        try:
            return call(self, *args, **kwargs)
        finally:
            _LAUNCHES.pop()

    @functools.wraps(init_args)
    def host_args(self, args_dev, kwargs):
        args_hst, kwargs_hst = init_args(self, args_dev, kwargs)
        if _LAUNCHES:
            _ranges((args_hst, kwargs_hst), _LAUNCHES[-1])
        return args_hst, kwargs_hst

    load, store = builder.create_masked_load, builder.create_masked_store
    cas, rmw = builder.create_atomic_cas, builder.create_atomic_rmw

    def masked_load(self, ptrs, mask, other, *rest, **kw):
        _check(ptrs, mask, "load")
        return load(self, ptrs, mask, other, *rest, **kw)

    def masked_store(self, ptrs, value, mask, *rest, **kw):
        _check(ptrs, mask, "store")
        return store(self, ptrs, value, mask, *rest, **kw)

    def atomic_cas(self, ptr, cmp, val, *rest, **kw):
        _check(ptr, None, "atomic")
        return cas(self, ptr, cmp, val, *rest, **kw)

    def atomic_rmw(self, op, ptr, val, mask, *rest, **kw):
        _check(ptr, mask, "atomic")
        return rmw(self, op, ptr, val, mask, *rest, **kw)

    executor.__call__, executor._init_args_hst = launch, host_args
    builder.create_masked_load, builder.create_masked_store = masked_load, masked_store
    builder.create_atomic_cas, builder.create_atomic_rmw = atomic_cas, atomic_rmw
    INSTALLED.append(True)
