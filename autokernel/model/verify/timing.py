"""verify's timing: choose the kernels on the whole model in the user's mode, then time every mode.

Order: (1) on a GPU, the kernel selection (autokernel.model.verify.ablation) in the user's mode:
eager compares patched forwards, compile compares compiled patched forwards, and the other mode
starts from that choice; (2) every mode with the chosen kernels, interleaved
(autokernel.model.verify.modes); (3) the no-regression guard: a patched mode that is not faster
than its unpatched counterpart by more than the noise of the paired rounds gets no kernels, so
no mode is slower than the model without them; (4) the graph-break check of the patched forward
under torch.compile. On the CPU the kernels run in Triton's interpreter, whose times say nothing
of GPU speed: selection and guard are off there unless asked for, and every kernel that ran is
plugged in.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

from torch import nn

from autokernel.model.kernel_ops import LoadedKernel, Policy
from autokernel.model.verify.ablation import ROUNDS, Ablation, ablate
from autokernel.model.verify.modes import (
    BASE,
    COMPILE,
    COMPILE_GRAPHS,
    COMPILE_GRAPHS_PATCHED,
    COMPILE_PATCHED,
    EAGER,
    GRAPHS,
    GRAPHS_PATCHED,
    PATCHED,
    PATCHED_MODE,
    ModeTiming,
    Variant,
    graph_breaks,
    ms_per_forward,
    paired_ratio,
    recompile_limit,
    summarize,
    time_modes,
)
from autokernel.run.keep_rule import MIN_GAIN
from autokernel.timing import clock_name


@dataclass
class Timed:
    clock: str
    mode: str  # the user's mode the selection ran in
    modes: dict[str, ModeTiming] = field(default_factory=dict)
    kept: dict[str, list[str]] = field(default_factory=dict)  # "eager"/"compile" -> targets
    ablation: Ablation | None = None
    graph_breaks: dict[str, Any] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)

    def modes_json(self) -> dict[str, dict]:
        return {m: asdict(t) for m, t in self.modes.items()}


def time_model(
    model: nn.Module,
    inputs: Sequence[Any],
    kernels: Sequence[LoadedKernel],
    *,
    mode: str,
    on_gpu: bool,
    select: bool,
    with_compile: bool = True,
    cuda_graphs: bool = False,
    rounds: int = ROUNDS,
    policy: Policy = "dtype",
    timer: Callable[[Callable[[], Any], bool], float] = ms_per_forward,
) -> Timed:
    """Select (when `select`), time every mode, guard, check graph breaks; see the docstring."""
    by_name = {k.name: k for k in kernels}
    names = list(by_name)
    cache: dict[tuple, Variant] = {}

    def variant(targets: Sequence[str], compiled: bool, graphed: bool = False) -> Variant:
        key = (frozenset(targets), compiled, graphed)
        if key not in cache:
            chosen = [by_name[t] for t in names if t in key[0]]
            cache[key] = Variant(model, inputs, chosen, compiled=compiled, graphed=graphed,
                                 policy=policy)  # fmt: skip
        return cache[key]

    timed = Timed(clock=clock_name(on_gpu), mode=mode, kept={"eager": names, "compile": names})
    with recompile_limit():
        try:
            if select and names:
                compiled = mode == "compile"
                timed.ablation = ablate(
                    names, lambda s: _warm_timer(variant(sorted(s), compiled), on_gpu, timer),
                    mode, rounds,
                )  # fmt: skip
                # The other mode starts from this mode's choice (a kernel that slows the eager
                # forward rarely helps the compiled one) and passes the guard below.
                timed.kept = {"eager": timed.ablation.kept, "compile": timed.ablation.kept}
            elif names:
                timed.notes.append(
                    "kernel selection off (CPU: interpreter times say nothing of GPU speed): "
                    "every kernel that ran is plugged in"
                )
            runners: dict[str, Callable[[], Any]] = {EAGER: variant((), False)}
            if timed.kept["eager"]:
                runners[PATCHED] = variant(timed.kept["eager"], False)
            if with_compile:
                runners[COMPILE] = variant((), True)
                if timed.kept["compile"]:
                    runners[COMPILE_PATCHED] = variant(timed.kept["compile"], True)
            if cuda_graphs:
                runners[GRAPHS] = variant((), False, graphed=True)
                if timed.kept["eager"]:
                    runners[GRAPHS_PATCHED] = variant(timed.kept["eager"], False, graphed=True)
                if with_compile:
                    runners[COMPILE_GRAPHS] = variant((), True, graphed=True)
                    if timed.kept["compile"]:
                        runners[COMPILE_GRAPHS_PATCHED] = variant(timed.kept["compile"], True,
                                                                  graphed=True)  # fmt: skip
            samples, errors = time_modes(runners, on_gpu, rounds, timer)
            for m, why in errors.items():
                timed.notes.append(f"{m}: could not run: {why}")
            for m, s in samples.items():
                timed.modes[m] = summarize(m, s, getattr(runners[m], "kernels", []))
            if select:
                _guard(timed, samples)
            for user_mode, pm in PATCHED_MODE.items():  # no kernels kept: the mode is its base
                b = timed.modes.get(BASE[pm])
                if pm not in timed.modes and b and (user_mode == "eager" or with_compile):
                    timed.modes[pm] = ModeTiming(pm, b.ms, b.spread, [], list(b.rounds_ms))
            if with_compile and COMPILE in samples and names:
                timed.graph_breaks = _breaks(variant((), False), variant(names, False))
        finally:
            for v in cache.values():
                v.close()
    return timed


def _warm_timer(v: Variant, on_gpu: bool, timer: Callable) -> float:
    """One forward outside the samples first: a compiled variant compiles on its first call."""
    if not getattr(v, "_warm", False):
        v()
        v._warm = True  # type: ignore[attr-defined]
    return timer(v, on_gpu)


def _guard(timed: Timed, samples: dict[str, list[float]]) -> None:
    """A patched mode not faster than its base beyond the noise runs without kernels. The user's
    modes (eager, compile) decide what `optimized/` keeps; a captured mode only reports."""
    user_mode_of = {pm: user for user, pm in PATCHED_MODE.items()}
    for pm, base in BASE.items():
        if pm not in samples or base not in samples:
            continue
        ratio, noise = paired_ratio(samples[base], samples[pm])
        if ratio - 1.0 > max(MIN_GAIN, noise):
            continue
        measured = timed.modes[pm]
        where = f"left out in {user_mode_of[pm]} mode, " if pm in user_mode_of else ""
        timed.notes.append(
            f"{pm}: {', '.join(measured.kernels)} made the forward {ratio:.2f}x of {base} "
            f"(noise ±{noise:.1%}): {where}{pm} runs as {base}"
        )
        b = timed.modes[base]
        timed.modes[pm] = ModeTiming(pm, b.ms, b.spread, [], list(b.rounds_ms), measured.ms)
        if pm in user_mode_of:
            timed.kept[user_mode_of[pm]] = []


def _breaks(plain: Variant, patched: Variant) -> dict[str, Any]:
    """Graph breaks of the patched forward, and of the plain one where the patched one has any
    (to tell the model's own breaks from ours): one Dynamo trace each, seconds on a large model."""
    out: dict[str, Any] = {}
    for label, v in ((COMPILE_PATCHED, patched), (COMPILE, plain)):
        try:
            out[label], reasons = graph_breaks(v)
        except Exception as exc:  # explain itself failed: report, the timings still stand
            out[label] = None
            reasons = [f"torch._dynamo.explain raised {type(exc).__name__}: {exc}"]
        if reasons:
            out[f"{label} reasons"] = reasons
        if out[label] == 0:
            break
    return out
