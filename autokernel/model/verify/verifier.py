"""`autokernel verify`: the optimized kernels in the whole model, still right and how much faster.

Kernels come from the workspace: optimized/<target>.py, else the target's best kept commit's
kernel.py (read through git), else the target is skipped with a note. The model runs eagerly
and patched on the same inputs; each output is compared relative to its scale,
max|patched - eager| / max(1, max|eager|), against the dtype's harness tolerance times
ACCUMULATION_FACTOR, and a bf16/fp16 model also runs once in float32 (cast in place and back,
autokernel.model.verify.upcast): patched must stay near that exact answer, as near as eager's
own rounding lets it (autokernel.model.verify.outputs says both rules). A replacement whose
kernel never ran is an error, with the reason its calls fell back or that nothing in the model
matched it. On a GPU a target whose best measured slower than eager stays with PyTorch
(--keep-slower overrides). Which kernels stay is then decided on the whole forward in the
user's mode, every mode is timed and the prediction checked
(autokernel.model.verify.timing, .prediction); the decision goes to optimized/modes.json.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import torch
from torch import nn

from autokernel.judged import UnjudgedKernel, require_judged
from autokernel.mode import Mode, default_mode
from autokernel.model.calls import route_head
from autokernel.model.kernel_ops import KernelLoadError, LoadedKernel, Policy, load_kernel
from autokernel.model.kinds import KINDS
from autokernel.model.loading import place_inputs, placed_at, run_placement
from autokernel.model.patching import Patch
from autokernel.model.verify import mode_record, prediction
from autokernel.model.verify.ablation import ROUNDS
from autokernel.model.verify.modes import BASE, PATCHED_MODE, best_mode
from autokernel.model.verify.outputs import ACCUMULATION_FACTOR, OutputCheck, compare
from autokernel.model.verify.prediction import amdahl
from autokernel.model.verify.timing import Timed, time_model
from autokernel.model.verify.upcast import reference_outputs
from autokernel.run import layout
from autokernel.specs import GENERIC, dtype_name
from autokernel.specs.region import Region
from autokernel.timing import CPU_CLOCK

__all__ = [
    "ACCUMULATION_FACTOR", "OutputCheck", "VerifyError", "VerifyResult", "amdahl",
    "collect_kernels", "compare", "verify_model",
]  # fmt: skip

KERNEL = layout.KERNEL.as_posix()

WHERE = {kind: side.where for kind, side in KINDS.items()}


class VerifyError(Exception):
    """Bad input to verify (no kernels, unreadable state, a model that fails); exit code 2."""


@dataclass
class VerifyResult:
    model: str
    device: str
    dtype: str
    kernels: dict[str, str]  # target name -> kernel file (or commit) it came from
    outputs: list[OutputCheck]
    calls: dict[str, dict]  # kernel type -> kernel/fallback counts and reasons
    errors: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    clock: str = ""
    mode: str = "eager"  # the user's mode: the kernel selection ran in it
    eager_ms: float | None = None
    patched_ms: float | None = None
    compile_ms: float | None = None
    modes: dict[str, dict] = field(default_factory=dict)  # mode -> ModeTiming as a dict
    best_mode: str | None = None
    kept: dict[str, list[str]] = field(default_factory=dict)  # eager/compile -> targets that help
    selection: dict | None = None  # the ablation (verify/ablation.py, Ablation.to_json)
    graph_breaks: dict[str, Any] = field(default_factory=dict)
    predicted_speedup: float | None = None  # Amdahl, from the per-kernel speedups
    expected: dict[str, float] = field(default_factory=dict)  # per target, by kernel figures
    predictions: list[dict] = field(default_factory=list)  # prediction.Prediction.to_json

    @property
    def outputs_match(self) -> bool:
        return all(o.ok for o in self.outputs)

    @property
    def ok(self) -> bool:
        return self.outputs_match and not self.errors

    def speedup(self, baseline_ms: float | None) -> float | None:
        if baseline_ms and self.patched_ms:
            return baseline_ms / self.patched_ms
        return None

    def ms(self, mode: str) -> float | None:
        entry = self.modes.get(mode)
        return entry["ms"] if entry else None

    def to_json(self) -> dict:
        data = asdict(self)
        data["outputs"] = [{**asdict(o), "ok": o.ok, "margin": o.margin} for o in self.outputs]
        data |= {"ok": self.ok, "outputs_match": self.outputs_match,
                 "speedup_vs_eager": self.speedup(self.eager_ms),
                 "speedup_vs_compile": self.speedup(self.compile_ms)}  # fmt: skip
        return data


def collect_kernels(
    workspace: Path, skip_slower: bool = False
) -> tuple[list[LoadedKernel], dict[str, str], list[str]]:
    """(kernels, where each came from, notes) for the workspace's targets. With skip_slower, a
    target whose best is slower than what it replaces (TargetState.model_gain) stays with PyTorch:
    on a GPU plugging it in could only slow the model down."""
    from autokernel.run import state as run_state

    try:
        state = run_state.load(workspace)
    except ValueError as exc:
        raise VerifyError(str(exc)) from None
    kernels, origin, notes = [], {}, []
    if state is None:
        for path in sorted((workspace / layout.OPTIMIZED).glob("*.py")):
            k = _load(path, path.stem)
            if k.kernel_type == GENERIC:  # its region and route are the run's, in its state
                notes.append(f"{path.stem}: skipped: a generic kernel needs its run's "
                             f"{run_state.STATE_FILE} (its region and route)")  # fmt: skip
                continue
            kernels.append(k)
            origin[path.stem] = str(path)
    else:
        for ts in state.targets:
            name, shapes = ts.name, ts.target.shapes
            x = ts.model_gain()
            if skip_slower and x is not None and x < 1.0:
                notes.append(f"{name}: left to PyTorch: its best is slower than what it replaces"
                             f" ({x:.2f}x); --keep-slower uses it anyway")  # fmt: skip
                continue
            path = workspace / layout.optimized(name)
            if path.is_file():
                origin[name] = str(path)
            elif ts.best_commit:
                path = _from_commit(workspace, ts.best_commit, name)
                origin[name] = f"{KERNEL} at {ts.best_commit[:10]}"
            else:
                notes.append(f"{name}: skipped: no optimized/{name}.py and no kept commit")
                continue
            k = _load(path, name, shapes)
            if k.kernel_type == GENERIC:
                k.region = Region.from_dict(ts.target.region or {})
                k.route = ts.target.route
            kernels.append(k)
    if not kernels:
        raise VerifyError(
            f"no kernels in {workspace}: expected optimized/<target>.py or a run's "
            f"{run_state.STATE_FILE} with kept commits"
        )
    return kernels, origin, notes


def _load(path: Path, name: str, shapes: tuple = ()) -> LoadedKernel:
    try:
        require_judged(path)  # the user's own process: only files a PASS verdict recorded
        return load_kernel(path, name, shapes)
    except (KernelLoadError, UnjudgedKernel) as exc:
        raise VerifyError(str(exc)) from None


def _from_commit(workspace: Path, sha: str, name: str) -> Path:
    from autokernel.run.workspace import Workspace, WorkspaceError

    try:
        source = Workspace.open(workspace).show(sha, KERNEL)
    except WorkspaceError as exc:
        raise VerifyError(f"{name}: cannot read its best kernel: {exc}") from None
    path = workspace / layout.VERIFY / f"{name}.py"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(source)
    return path


def verify_model(
    model: nn.Module,
    inputs: list,
    kernels: list[LoadedKernel],
    *,
    name: str = "model",
    policy: Policy = "dtype",
    timing: bool = True,
    with_compile: bool = True,
    mode: Mode | None = None,
    select: bool | None = None,
    cuda_graphs: bool = False,
    rounds: int = ROUNDS,
    factor: float = ACCUMULATION_FACTOR,
) -> VerifyResult:
    """Eager vs patched on the same inputs, call counts, and (optionally) the kernel selection
    in `mode` (default: compile on a GPU) and every mode's timing. `select` defaults to on for
    a CUDA model (see autokernel.model.verify.timing for why not on the CPU)."""
    if mode == "compile" and timing and not with_compile:
        raise VerifyError("mode compile needs the compile modes timed (with_compile=True)")
    inputs = place_inputs(inputs, run_placement(model, inputs)[0])
    device, dtype = placed_at(model, inputs)  # reported and timed as it really runs
    patch = Patch(kernels, policy)
    try:
        with torch.no_grad():
            try:
                ref = model(*inputs)
            except Exception as exc:
                raise VerifyError(
                    f"the model's forward raised {type(exc).__name__}: {exc}"
                ) from exc
            exact, why = reference_outputs(model, inputs, dtype)  # one forward, float32
            with patch.applied(model, traced=False):  # as the timed eager forward routes
                out = model(*inputs)
        result = VerifyResult(
            model=name, device=str(device), dtype=dtype_name(dtype),
            kernels={k.name: str(k.path) for k in kernels},
            outputs=compare(ref, out, dtype, factor, exact), calls=patch.counts(),
            notes=[*([why] if why else []), *dict.fromkeys(patch.notes)],
            mode=mode or (default_mode(device) if with_compile else "eager"),
        )  # fmt: skip
        result.errors = _never_called(patch)
    finally:
        patch.close()
    if timing:
        candidates = _candidates(model, inputs, (ref, exact), kernels, result, dtype, factor,
                                 policy)  # fmt: skip
        on_gpu = device.type == "cuda"
        timed = time_model(
            model, inputs, candidates, mode=result.mode, on_gpu=on_gpu,
            select=on_gpu if select is None else select, with_compile=with_compile,
            cuda_graphs=cuda_graphs, rounds=rounds, policy=policy,
        )  # fmt: skip
        _fill(result, timed)
    return result


def _candidates(
    model: nn.Module, inputs: list, refs: tuple[Any, Any], kernels: list[LoadedKernel],
    result: VerifyResult, dtype: torch.dtype, factor: float, policy: Policy,
) -> list[LoadedKernel]:  # fmt: skip
    """The kernels that ran and keep the outputs right: all that ran when the outputs match,
    else each checked alone, so one wrong kernel does not keep the others out of the timing.
    `refs`: the eager outputs and the float32 ones (None for a float32 model)."""
    ran = [k for k in kernels if _ran(result, k)]
    if result.outputs_match:
        return ran
    good = []
    for k in ran:
        alone = Patch([k], policy)
        try:
            with torch.no_grad(), alone.applied(model, traced=False):
                out = model(*inputs)
        finally:
            alone.close()
        if all(c.ok for c in compare(refs[0], out, dtype, factor, refs[1])):
            good.append(k)
        else:
            result.notes.append(f"{k.name}: left out of the timing: its outputs differ from eager")
    return good


def _fill(result: VerifyResult, timed: Timed) -> None:
    result.clock = timed.clock
    result.modes = timed.modes_json()
    result.kept = timed.kept
    result.selection = timed.ablation.to_json() if timed.ablation else None
    result.graph_breaks = timed.graph_breaks
    result.notes += timed.notes
    result.best_mode = best_mode(timed.modes)
    result.eager_ms, result.patched_ms, result.compile_ms = (
        result.ms("eager"), result.ms("patched"), result.ms("compile"),
    )  # fmt: skip


def _never_called(patch: Patch) -> list[str]:
    errors = []
    for kind, c in patch.counts().items():
        if c["kernel"]:
            continue
        if not c["sites"]:
            if c["kernel_type"] == GENERIC:
                route = patch.routers[kind].kernels[0].route
                where = f"the call its plan names: {route_head(route)}"
            else:
                where = WHERE[kind]
            errors.append(f"{kind}: never called: nothing in the model matched ({where})")
        else:
            reasons = "; ".join(f"{r} ({n}x)" for r, n in c["fallback_reasons"].items())
            errors.append(f"{kind}: never called: all {c['fallback']} calls fell back: {reasons}")
    return errors


def verify_workspace(
    source: Any, workspace: Path, keep_slower: bool = False, **options: Any
) -> VerifyResult:
    """Load the model (autokernel.model.loading) and the workspace's kernels, verify, check the
    prediction and, where the kernel selection ran, record it in optimized/modes.json."""
    from autokernel.model.loading import ModelInputError, load_model

    # A workspace with nothing to verify fails now, not after a large model has loaded (which
    # kernels count depends on the model's device, so they are collected again below).
    collect_kernels(workspace)
    try:
        loaded = load_model(source)
    except ModelInputError as exc:
        raise VerifyError(str(exc)) from None
    skip = loaded.device.type == "cuda" and not keep_slower  # CPU figures: interpreter, not speed
    kernels, origin, notes = collect_kernels(workspace, skip_slower=skip)
    result = verify_model(loaded.model, loaded.inputs, kernels, name=loaded.name, **options)
    result.kernels, result.notes = origin, notes + result.notes
    conclude(result, kernels, workspace)
    return result


def conclude(result: VerifyResult, kernels: list[LoadedKernel], workspace: Path) -> None:
    """The workspace's part of a verify: the prediction checks against the run's state, and
    the selection recorded in optimized/modes.json."""
    ran = {k.name for k in kernels if _ran(result, k)}
    result.predicted_speedup = amdahl(workspace, ran)
    result.expected = prediction.expected_ratios(workspace, ran)
    if result.modes and result.clock == CPU_CLOCK and not result.selection:
        result.notes.append(
            "no prediction check: on the CPU the kernels run in Triton's interpreter, whose "
            "times say nothing of their GPU speed (run verify on a GPU)"
        )
    elif result.modes:
        result.predictions = [p.to_json() for p in _predictions(result, workspace)]
    if result.selection:
        _record(result, workspace)


def _predictions(result: VerifyResult, workspace: Path) -> list[prediction.Prediction]:
    """The user's mode's patched forward against what was expected of it: from the measured
    whole-model effects when there are any (this run's, else the record's), and in eager mode
    also from the kernel speedups, so a kernel-level figure that does not hold is named."""
    pm = PATCHED_MODE[result.mode]
    base, measured = result.ms(BASE[pm]), result.ms(pm)
    if base is None or measured is None:
        return []
    kept = result.kept.get(result.mode, [])
    sel = result.selection
    try:
        effects = (
            mode_record.ratios(sel) if sel else mode_record.effects(workspace, result.mode)
        )  # fmt: skip
    except mode_record.RecordError as exc:
        result.notes.append(str(exc))
        effects = {}
    out = []
    by_effects = prediction.from_effects(base, effects, kept) if effects else None
    if by_effects is not None:
        out.append(prediction.check(pm, prediction.EFFECTS, by_effects, measured,
                                    result.expected, effects))  # fmt: skip
    x = amdahl(workspace, set(kept)) if result.mode == "eager" else None
    if x:
        out.append(prediction.check(pm, prediction.KERNELS, base / x, measured,
                                    result.expected, effects))  # fmt: skip
    return out


def _record(result: VerifyResult, workspace: Path) -> None:
    """optimized/modes.json: the user's mode from the selection, the other from the guard."""
    assert result.selection is not None
    for m, kept in result.kept.items():
        pm = PATCHED_MODE[m]
        if pm not in result.modes:
            continue
        entry = {"kept": kept, "model": result.model, "device": result.device,
                 "base_ms": result.ms(BASE[pm]), "patched_ms": result.ms(pm)}  # fmt: skip
        if m == result.mode:
            entry |= {k: result.selection.get(k, {})
                      for k in ("dropped", "effects", "kept_effects")}  # fmt: skip
        mode_record.write(workspace, m, entry)


def _ran(result: VerifyResult, k: LoadedKernel) -> bool:
    key = k.name if k.kernel_type == GENERIC else k.kernel_type
    return result.calls.get(key, {}).get("by_kernel", {}).get(k.name, 0) > 0
