"""Register spills of a candidate's compiled Triton kernels, read after it ran.

Why: a config that spills registers to local memory still passes and still runs, only slower,
often by far. The H200 sweeps measured, for example, layernorm 4096x50257 at 3456 µs with
16384-column steps and 4 warps against 471 µs with 2048, and reduce at 4182 µs against 118.
The tuner can prune every config at least that large, as it does for one that ran out of shared
memory, but only if the verdict says that the kernel spilled.

Triton keeps each compiled kernel, with the spill count the driver reported at load time, in the
JIT function's per-device cache. That cache is internal and its layout has changed between
releases, so everything here is read defensively. When it cannot be read (the interpreter, or
another Triton), the answer is None ("unknown"), never 0.
"""

from __future__ import annotations

from collections.abc import Iterator
from types import ModuleType
from typing import Any


def _jit_functions(module: ModuleType) -> Iterator[Any]:
    for value in vars(module).values():
        if hasattr(value, "device_caches") and hasattr(value, "fn"):  # triton JITFunction
            yield value


def _compiled(fn: Any) -> Iterator[Any]:
    caches = getattr(fn, "device_caches", None)
    if not isinstance(caches, dict):
        return
    for entry in caches.values():
        cache = entry[0] if isinstance(entry, tuple) and entry else entry
        if isinstance(cache, dict):
            yield from cache.values()


def spilled_registers(module: ModuleType) -> int | None:
    """The most 32-bit registers per thread that any compiled kernel in `module` spilled (the
    driver's local memory size / 4, as Triton reports it), or None when no compiled kernel
    with a known figure is found."""
    worst: int | None = None
    try:
        for fn in _jit_functions(module):
            for kernel in _compiled(fn):
                n = getattr(kernel, "n_spills", None)
                if isinstance(n, int) and not isinstance(n, bool):
                    worst = max(worst or 0, n)
    except Exception:  # an internal layout we do not know: unknown, not "no spills"
        return None
    return worst
