"""Eager and torch.compile timings of each spec's PyTorch baseline, measured once per machine,
size and dtype, and cached: the denominators of every speedup the loop reports.

Measured in the worker before any candidate code is imported, so a candidate cannot touch them.
"""

from __future__ import annotations

import time
from pathlib import Path

import torch

from autokernel.cache import cache_dir, read_json, write_json_atomic
from autokernel.specs import KernelSpec, Size, dtype_name
from autokernel.timing import measure

CACHE_FILE = "baselines.json"


def device_name(device: torch.device) -> str:
    return torch.cuda.get_device_name(device) if device.type == "cuda" else "cpu"


def key(spec: KernelSpec, size: Size, dtype: torch.dtype, device: torch.device, kind: str) -> str:
    return "|".join(
        (device_name(device), f"torch {torch.__version__}", spec.cache_name, spec.label(size),
         dtype_name(dtype), kind)
    )  # fmt: skip


def _path() -> Path:
    return cache_dir() / CACHE_FILE


def lookup(
    spec: KernelSpec, size: Size, dtype: torch.dtype, device: torch.device, kind: str
) -> float | None:
    value = read_json(_path()).get(key(spec, size, dtype, device, kind))
    return float(value) if isinstance(value, (int, float)) else None


def _compiled(spec: KernelSpec):
    import torch._dynamo

    # One compiled function sees every benchmark shape; dynamo's default recompile limit (8)
    # would silently fall back to eager after it.
    torch._dynamo.config.cache_size_limit = max(torch._dynamo.config.cache_size_limit, 256)
    return torch.compile(spec.eager, dynamic=False)


def ensure(
    spec: KernelSpec,
    sizes: tuple[Size, ...],
    dtype: torch.dtype,
    device: torch.device,
    seed: int,
    with_compile: bool,
) -> dict[str, str]:
    """Measure whatever is missing from the cache; returns notes on baselines that failed."""
    data = read_json(_path())
    notes: dict[str, str] = {}
    on_gpu = device.type == "cuda"
    compiled = None
    for size in sizes:
        kinds = ["eager", "compile"] if with_compile else ["eager"]
        missing = [k for k in kinds if key(spec, size, dtype, device, k) not in data]
        if not missing:
            continue
        gen = torch.Generator(device=device).manual_seed(seed)
        args = spec.make_inputs(size, dtype, gen, device)
        for kind in missing:
            if kind == "eager":
                fn = spec.eager
            else:
                compiled = compiled or _compiled(spec)
                fn = compiled
            t0 = time.perf_counter()
            try:
                us = measure(lambda fn=fn, args=args: fn(*args), on_gpu).median_us
            except Exception as exc:  # a baseline that cannot run is reported, not fatal
                notes[f"{spec.label(size)} {kind}"] = f"{type(exc).__name__}: {exc}"[:300]
                continue
            data = read_json(_path())  # another worker may have written meanwhile
            data[key(spec, size, dtype, device, kind)] = us
            data[key(spec, size, dtype, device, kind) + "|measure_s"] = time.perf_counter() - t0
            write_json_atomic(_path(), data)
        del args
    return notes
