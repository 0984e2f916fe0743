"""The fast launch path the starters share: a call signature's plan, and the compiled kernel
launched without Triton's per-call binding.

kernel.py may import `launcher` and `remember` from here and nothing else of autokernel (the
static guard's rule): the fast path reads Triton internals (the driver, launch hooks, the
CompiledKernel's launcher) that a candidate must never touch itself, and nine starters carrying
copies of it would drift apart.
"""

from __future__ import annotations

import os
from collections.abc import Callable

import torch

if not torch.cuda.is_available():
    # Triton reads this once, at its first import, and a starter imports this module before
    # anything else of ours: without it kernels could not run on CPU tensors.
    os.environ.setdefault("TRITON_INTERPRET", "1")

import triton

MAX_PLANS = 1024  # a model whose sequence length changes brings a new signature per length


def remember(plans: dict, key: tuple, run: Callable) -> Callable:
    """Keep `run` as the plan for `key` in `plans`; the table is emptied when it is full."""
    if len(plans) >= MAX_PLANS:
        plans.clear()
    plans[key] = run
    return run


def launcher(kernel, grid: tuple, fixed: tuple, options: dict):
    """launch(*live): kernel[grid](*live, *fixed, **options), where fixed holds the arguments
    that depend only on the call signature. The first launch goes through Triton as usual; on a
    GPU it returns the CompiledKernel, and later launches go straight to it (_direct), skipping
    the argument binding and cache lookup that made up half of a launch's host time on the
    H200. The interpreter returns no CompiledKernel: there every launch is the usual one."""
    compiled = []
    usual = kernel[grid]

    def launch(*live) -> None:
        if compiled:
            compiled[0](*live, *fixed)
            return
        result = usual(*live, *fixed, **options)
        # An autotuned or hooked kernel takes arguments a replay would not supply: usual path.
        plain = isinstance(kernel, triton.runtime.jit.JITFunction) and not kernel.pre_run_hooks
        if plain and isinstance(result, triton.compiler.CompiledKernel):
            compiled.append(_direct(result, (*grid, 1, 1)[:3]))

    return launch


def _direct(compiled, grid3: tuple):
    """launch(*all_args) for a CompiledKernel: its launcher called as JITFunction.run calls it
    (the same signature in Triton 3.6 and 3.7), without the launch-hook metadata Triton builds
    for every launch even when no hook is registered. While a profiler hook is registered, or
    if the direct call is refused, Triton's public compiled[grid](*all_args) launches instead."""
    runner = compiled[grid3]  # also loads the kernel onto the device
    run, function, meta = compiled.run, compiled.function, compiled.packed_metadata
    driver, knobs, chain = (
        triton.runtime.driver.active,
        triton.knobs.runtime,
        triton.knobs.HookChain,
    )
    g0, g1, g2 = grid3
    state = {"direct": True}

    def launch(*args) -> None:
        enter, leave = knobs.launch_enter_hook, knobs.launch_exit_hook
        quiet = isinstance(enter, chain) and isinstance(leave, chain)
        if not (state["direct"] and quiet) or enter.calls or leave.calls:
            runner(*args)
            return
        stream = driver.get_current_stream(driver.get_current_device())
        try:
            run(g0, g1, g2, stream, function, meta, None, None, None, *args)
        except TypeError:  # a Triton whose launcher takes other arguments: refused before launch
            state["direct"] = False
            runner(*args)

    return launch
