"""The model's forward in every way a user could run it, timed side by side.

Modes: eager (the model as it is), patched (kernels plugged in), compile (torch.compile of the
plain model), compile+patched (torch.compile of the patched model), and, opt-in, the same four
captured in a CUDA graph: cuda-graphs and cuda-graphs+patched, compile+cuda-graphs (what
torch.compile's "reduce-overhead" mode gives a user without us) and compile+cuda-graphs+patched.
Capture removes the gap between wall and kernel time, 9-17 % of a compiled decoder's forward at
4096 tokens on an H100 (benchmarks/results/h100-ceiling-2026-12-06.md): a patched captured mode
is judged against the same model captured without our kernels, so that gain is never credited
to them.

Each mode is a Variant: its own copy of the module tree with the parameters shared, so every
variant stays patched and compiled at once and the rounds can alternate between them without
re-patching (which would change what torch.compile guards on and recompile every call).

Timing: every variant runs WARMUP_CALLS times first (compilation, autotuning, capture), then
`rounds` rounds each time every variant once through the harness's one timing path
(autokernel.timing.measure), the order rotated per round; a mode's figure is the median
over rounds and its spread the half p20-p80 over rounds. One measurement from a single run was
not reproducible at these sizes (42 vs 110 µs per call for the same kernel in two runs).
"""

from __future__ import annotations

import copy
import itertools
import statistics
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import torch
from torch import nn

from autokernel.harness.interleave import relative_half_spread
from autokernel.model.kernel_ops import LoadedKernel, Policy
from autokernel.model.patching import Patch
from autokernel.model.verify.ablation import interleaved
from autokernel.model.verify.cuda_graphs import GraphedForward
from autokernel.timing import measure

EAGER, PATCHED, COMPILE, COMPILE_PATCHED = "eager", "patched", "compile", "compile+patched"
GRAPHS, GRAPHS_PATCHED = "cuda-graphs", "cuda-graphs+patched"
COMPILE_GRAPHS, COMPILE_GRAPHS_PATCHED = "compile+cuda-graphs", "compile+cuda-graphs+patched"
ALL_MODES = (EAGER, PATCHED, COMPILE, COMPILE_PATCHED, GRAPHS, GRAPHS_PATCHED, COMPILE_GRAPHS,
             COMPILE_GRAPHS_PATCHED)  # fmt: skip
# what a patched mode is judged by: the same model without our kernels, run the same way
BASE = {PATCHED: EAGER, COMPILE_PATCHED: COMPILE, GRAPHS_PATCHED: GRAPHS,
        COMPILE_GRAPHS_PATCHED: COMPILE_GRAPHS}  # fmt: skip
PATCHED_MODE = {"eager": PATCHED, "compile": COMPILE_PATCHED}  # user's mode -> its patched mode
ROUNDS = 5
WARMUP_CALLS = 2
# Every variant compiles the same forward code with other globals: more cache entries than
# Dynamo's default of 8 per code object.
RECOMPILE_LIMIT = 64


def shared_copy(model: nn.Module) -> nn.Module:
    """A copy of the module tree whose parameters and buffers are the original's (no memory)."""
    memo = {id(t): t for t in itertools.chain(model.parameters(), model.buffers())}
    return copy.deepcopy(model, memo)


class Variant:
    """The model with `kernels` plugged in (none: the model itself), optionally compiled or
    captured in a CUDA graph; calling it runs one forward on the stored inputs."""

    def __init__(
        self,
        model: nn.Module,
        inputs: Sequence[Any],
        kernels: Sequence[LoadedKernel] = (),
        *,
        compiled: bool = False,
        graphed: bool = False,
        policy: Policy = "dtype",
    ) -> None:
        self.inputs = list(inputs)
        self.kernels = [k.name for k in kernels]
        self.compiled, self.graphed = compiled, graphed
        self.patch = Patch(kernels, policy) if kernels else None
        self.model = shared_copy(model) if self.patch else model
        if self.patch:
            self.patch.patch_modules(self.model)
        fn: Callable[..., Any] = self.model
        if compiled:
            fn = torch.compile(self.model)
        if graphed:
            fn = GraphedForward(fn)
        self.fn = fn

    def __call__(self) -> Any:
        with torch.no_grad():
            if self.patch is None:
                return self.fn(*self.inputs)
            with self.patch.functions_active(self.model, traced=self.compiled):
                return self.fn(*self.inputs)

    def close(self) -> None:
        if self.patch:
            self.patch.close()


@dataclass
class ModeTiming:
    mode: str
    ms: float  # median over rounds
    spread: float  # half the p20-p80 over rounds, relative to the median
    kernels: list[str]  # the targets plugged in
    rounds_ms: list[float] = field(default_factory=list)
    rejected_ms: float | None = None  # with the kernels, when the guard left them out


def recompile_limit() -> Any:
    """A context raising Dynamo's per-code-object cache limit (its name changed in torch 2.6)."""
    import torch._dynamo.config as cfg

    name = "recompile_limit" if hasattr(cfg, "recompile_limit") else "cache_size_limit"
    return cfg.patch(**{name: RECOMPILE_LIMIT})


def ms_per_forward(fn: Callable[[], Any], on_gpu: bool) -> float:
    return measure(fn, on_gpu).median_us / 1e3


def time_modes(
    variants: dict[str, Callable[[], Any]],
    on_gpu: bool,
    rounds: int = ROUNDS,
    timer: Callable[[Callable[[], Any], bool], float] = ms_per_forward,
) -> tuple[dict[str, list[float]], dict[str, str]]:
    """(per-round ms of every mode that ran, why each other mode could not run). A mode whose
    warm-up raises (no C compiler for torch.compile, a model that cannot be captured) is
    reported, not fatal: the others are still timed."""
    errors: dict[str, str] = {}
    ready = []
    for mode, fn in variants.items():
        try:
            for _ in range(WARMUP_CALLS):
                fn()
        except Exception as exc:  # any failure of one mode leaves the others to be timed
            first = (str(exc).strip().splitlines() or [""])[0]
            errors[mode] = f"{type(exc).__name__}: {first}"
            continue
        ready.append(mode)
    samples = interleaved(ready, lambda m: timer(variants[m], on_gpu), max(1, rounds))
    return samples, errors


def summarize(mode: str, samples: list[float], kernels: list[str]) -> ModeTiming:
    med = statistics.median(samples)
    if len(samples) > 1:
        q = statistics.quantiles(samples, n=5)
        spread = (q[3] - q[0]) / 2 / med if med > 0 else 0.0
    else:
        spread = 0.0
    return ModeTiming(mode, med, spread, kernels, list(samples))


def paired_ratio(base: list[float], mode: list[float]) -> tuple[float, float]:
    """(median of base/mode over the rounds, its noise): > 1, the mode is faster."""
    ratios = [b / m for b, m in zip(base, mode, strict=True) if m > 0]
    if not ratios:
        return 1.0, 0.0
    return statistics.median(ratios), relative_half_spread(ratios)


def best_mode(timings: dict[str, ModeTiming]) -> str | None:
    return min(timings, key=lambda m: timings[m].ms) if timings else None


def graph_breaks(variant: Variant) -> tuple[int, list[str]]:
    """Graph breaks torch.compile meets in the variant's forward (torch._dynamo.explain), with
    the first few reasons. A custom op that broke the graph would split the compiled forward
    and cost a return to Python per break."""
    import torch._dynamo

    def explain() -> Any:
        with torch.no_grad():
            return torch._dynamo.explain(variant.model)(*variant.inputs)

    if variant.patch is None:
        out = explain()
    else:
        with variant.patch.functions_active(variant.model, traced=True):
            out = explain()
    reasons = [str(getattr(r, "reason", r)).splitlines()[0] for r in out.break_reasons]
    return int(out.graph_break_count), list(dict.fromkeys(reasons))[:3]
