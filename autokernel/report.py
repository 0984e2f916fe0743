"""`autokernel report`: the morning view of a run, from results.tsv and the orchestrator state.

results.tsv is the ground truth for every figure (it survives reverts and crashes); the state
file adds what only the orchestrator knows: each target's share of the model's time, the time
spent on it, why it was moved on from, and the commits holding its best kernel. Without the
state file the report still works, minus the shares and hence the whole-model estimate.
"""

from __future__ import annotations

import statistics
from dataclasses import asdict, dataclass, field
from pathlib import Path

from autokernel import DISTRIBUTION
from autokernel.run import layout
from autokernel.run.results import EMPTY, ResultRow, ResultsLog, RowStatus
from autokernel.run.worker_log import WorkerLog, summarize
from autokernel.stats import amdahl as amdahl  # the report's estimate

RESULTS_FILE = layout.RESULTS.name
PNG_FILE = layout.PROGRESS_PNG.name
BASELINE_AGENTS = ("starter", "best")  # rows that measure a known kernel, not a proposal
FAILED = (RowStatus.FAIL, RowStatus.CRASH, RowStatus.TIMEOUT, RowStatus.REJECTED)
TOP_KEPT = 5  # kept experiments listed by gain
MATPLOTLIB_HINT = f"pip install matplotlib (or pip install '{DISTRIBUTION}[report]')"


class ReportError(Exception):
    """Nothing to report, or a file that cannot be read; the message says what to do."""


@dataclass
class Point:
    """One experiment as plotted: its speedup vs the target's baseline (None: no timing)."""

    experiment: int
    status: str
    agent: str
    latency_us: float | None
    speedup: float | None


@dataclass
class TargetReport:
    name: str
    kernel_type: str
    status: str = "unknown"  # pending, active, done; unknown without the state file
    share: float | None = None  # of the model's GPU time; None without the state file
    baseline_us: float | None = None
    baseline_note: str = "not measured yet"
    baseline_vs_eager: float | None = None
    baseline_vs_compile: float | None = None
    best_us: float | None = None
    best_experiment: int | None = None
    best_commit: str | None = None
    speedup_vs_starter: float | None = None
    speedup_vs_eager: float | None = None
    speedup_vs_compile: float | None = None
    speedup_in_model: float | None = None  # vs the model's own profiled time (Target.model_ms)
    pct_peak: float | None = None
    throughput: float | None = None
    unit: str = ""
    best_backend: str = ""  # the best kernel's BACKEND; "" in results.tsv from before the column
    experiments: int = 0  # rows, measurements of known kernels included
    kept: int = 0
    reverted: int = 0
    failed: int = 0  # fail + crash + timeout + rejected
    remeasured: int = 0  # rows of agent "best": the current best kernel timed again
    seconds: float = 0.0
    seconds_source: str = "harness_s"  # "state": loop time incl. agents; else harness time only
    tokens: int = 0
    reason: str = ""
    optimized_commit: str | None = None
    points: list[Point] = field(default_factory=list)
    # In the report's mode (eager or compile): the target's share of the model's time there and
    # the starter's and best kernel's speedups over that mode's own time for the target (at the
    # model's shape where the plan gives it, else at the harness sizes).
    mode_share: float | None = None
    starter_vs_mode: float | None = None
    best_vs_mode: float | None = None
    night_share: float | None = None  # of the time spent on all targets


@dataclass
class Kept:
    experiment: int
    target: str
    commit: str
    description: str
    gain: float | None  # previous best's µs / this µs
    speedup_vs_starter: float | None


@dataclass
class Report:
    workspace: str
    results: str
    rows: int
    targets: list[TargetReport]
    top_kept: list[Kept]
    amdahl: float | None
    amdahl_note: str
    tag: str | None = None
    agent: str | None = None
    hours: float | None = None
    seconds: float | None = None
    ended: str = ""
    notes: list[str] = field(default_factory=list)
    mode: str = "eager"  # the baseline of mode_estimate and each target's *_vs_mode
    mode_estimate: float | None = None  # whole model vs the mode, best kernels that help only
    mode_note: str = ""
    per_hour: float | None = None  # experiments per hour of loop time (the state's seconds)
    workers: list[dict] = field(default_factory=list)  # parallel slots: worker_log.SlotSummary
    workers_span_s: float = 0.0  # first to last worker event

    def to_json(self) -> dict:
        return asdict(self)


def _median(values: list[float | None]) -> float | None:
    vals = [v for v in values if v is not None]
    return statistics.median(vals) if vals else None


def _ratio(a: float | None, b: float | None) -> float | None:
    return a / b if a is not None and b else None


def _target(name: str, rows: list[ResultRow]) -> TargetReport:
    """Counts, baseline, best and plot points of one target from its rows (experiment order)."""
    t = TargetReport(name=name, kernel_type=rows[0].kernel_type or EMPTY)
    t.experiments = len(rows)
    keep = RowStatus.KEEP
    starter = next((r for r in rows if r.agent == "starter"), None)
    first_keep = next(
        (i for i, r in enumerate(rows) if r.status is keep and r.agent not in BASELINE_AGENTS),
        len(rows),
    )
    # Re-measurements of the unchanged starter: the first timing may come from a cold machine.
    again = [r for r in rows[:first_keep] if r.agent == "best" and r.status is keep]
    if again:
        base = again
        cold = starter.latency_us if starter else None
        t.baseline_note = (
            f"median of {len(again)} re-measurements of the unchanged starter "
            f"(exp {', '.join(str(r.experiment) for r in again)})"
            + (f"; its first measurement (exp {starter.experiment}) gave {cold:.4g} µs"
               if starter and cold is not None else "")
        )  # fmt: skip
    else:
        base = [starter] if starter and starter.status is keep else []
        t.baseline_note = (
            f"the starter measured once (exp {starter.experiment})"
            if starter and base
            else "the starter has no timing"
        )
    t.baseline_us = _median([r.latency_us for r in base])
    t.baseline_vs_eager = _median([r.speedup_vs_eager for r in base])
    t.baseline_vs_compile = _median([r.speedup_vs_compile for r in base])

    for r in rows:
        us, n, status, agent = r.latency_us, r.experiment, r.status, r.agent or EMPTY
        t.points.append(Point(n, status.value, agent, us, _ratio(t.baseline_us, us)))
        t.seconds += r.harness_s or 0.0
        t.tokens += r.tokens or 0
        if status is keep:
            if agent in BASELINE_AGENTS:
                t.remeasured += agent == "best"
            else:
                t.kept += 1
            t.best_us, t.best_experiment, t.best_commit = us, n, r.commit or EMPTY
            t.speedup_vs_eager, t.speedup_vs_compile = r.speedup_vs_eager, r.speedup_vs_compile
            t.pct_peak, t.throughput = r.pct_peak, r.throughput
            t.unit = r.unit or EMPTY
            t.best_backend = r.backend or ""
        elif status is RowStatus.REVERT:
            t.reverted += 1
        elif status in FAILED:
            t.failed += 1
    # The best kernel is still the starter: by definition no faster than itself.
    still_starter = 1.0 if t.best_us is not None else None
    t.speedup_vs_starter = _ratio(t.baseline_us, t.best_us) if t.kept else still_starter
    return t


def _top_kept(
    by_target: dict[str, list[ResultRow]], reports: dict[str, TargetReport]
) -> list[Kept]:
    """Kept proposals ranked by their gain over the best kernel they replaced."""
    kept = []
    for name, rows in by_target.items():
        best: float | None = None
        for r in rows:
            if r.status is not RowStatus.KEEP:
                continue
            us = r.latency_us
            if r.agent not in BASELINE_AGENTS:
                kept.append(
                    Kept(r.experiment, name, r.commit or EMPTY, r.description or EMPTY,
                         _ratio(best, us), _ratio(reports[name].baseline_us, us))
                )  # fmt: skip
            best = us
    kept.sort(key=lambda k: (-(k.gain or 0.0), k.experiment))
    return kept[:TOP_KEPT]


def build(workspace: Path, mode: str | None = None) -> Report:
    """The report of the run in `workspace` against `mode` (default: the run's own, else
    eager); ReportError when there is nothing to report."""
    from autokernel.run import state as run_state

    root = Path(workspace).expanduser()
    if not root.is_dir():
        raise ReportError(f"{root} is not a directory: pass the run's --workspace")
    path = root / RESULTS_FILE
    if not path.exists():
        raise ReportError(f"nothing to report: no {path} — run `autokernel run` first")
    try:
        rows = ResultsLog(path).rows()
    except OSError as exc:
        raise ReportError(f"cannot read {path}: {exc}") from None
    if not rows:
        raise ReportError(
            f"nothing to report: {path} has no experiments yet — run `autokernel run`"
        )
    notes: list[str] = []
    try:
        state = run_state.load(root)
    except ValueError as exc:
        state = None
        notes.append(f"state file unreadable ({exc}); reporting from results.tsv alone")
    by_target: dict[str, list[ResultRow]] = {}
    for r in sorted(rows, key=lambda r: r.experiment):
        by_target.setdefault(r.target, []).append(r)
    reports = {name: _target(name, rs) for name, rs in by_target.items()}
    if state is None:
        if not notes:
            notes.append("no state file (.autokernel/state.json): shares, reasons and loop time "
                         "unknown")  # fmt: skip
    else:
        for ts in state.targets:
            t = reports.setdefault(ts.name, TargetReport(ts.name, ts.target.kernel_type))
            t.status, t.share, t.reason = ts.status, ts.target.share, ts.reason
            t.seconds, t.seconds_source = ts.seconds, "state"
            t.optimized_commit = ts.optimized_commit
            t.speedup_in_model = ts.target.model_speedup(t.best_us)
            if t.baseline_us is None and ts.baseline is not None:
                t.baseline_us, t.baseline_note = ts.baseline.us, "from the state file"
    targets = sorted(reports.values(), key=lambda t: (-(t.share or 0.0), t.name))
    mode = mode or (state.mode if state is not None else "eager")
    _in_mode(targets, state, mode)
    est, note = _estimate(targets, state is not None)
    report = Report(
        workspace=str(root.resolve()), results=str(path.resolve()), rows=len(rows),
        targets=targets, top_kept=_top_kept(by_target, reports), amdahl=est, amdahl_note=note,
        notes=notes,
    )  # fmt: skip
    if state is not None:
        report.tag, report.agent, report.hours = state.tag, state.agent, state.hours
        report.seconds, report.ended = state.seconds, state.ended
    report.mode = mode
    report.mode_estimate, report.mode_note = _mode_estimate(targets, mode, state is not None)
    if report.seconds:
        report.per_hour = 3600.0 * len(rows) / report.seconds
    slots, report.workers_span_s = summarize(WorkerLog(root).read())
    report.workers = [asdict(s) for s in slots]
    return report


def _in_mode(targets: list[TargetReport], state, mode: str) -> None:
    """Each target's share and speedups against `mode`, and its part of the night's time."""
    plans = {ts.name: ts.target for ts in state.targets} if state is not None else {}
    compile_mode = mode == "compile"
    spent = sum(t.seconds for t in targets)
    for t in targets:
        plan = plans.get(t.name)
        starter = t.baseline_vs_compile if compile_mode else t.baseline_vs_eager
        best = t.speedup_vs_compile if compile_mode else t.speedup_vs_eager
        if plan is not None:
            t.mode_share = plan.mode_share(mode)
            starter = plan.mode_speedup(t.baseline_us, mode) or starter
            best = plan.mode_speedup(t.best_us, mode) or best
        t.starter_vs_mode, t.best_vs_mode = starter, best
        t.night_share = t.seconds / spent if spent > 0 else None


def _mode_estimate(
    targets: list[TargetReport], mode: str, have_state: bool
) -> tuple[float | None, str]:
    """What the night bought in `mode`: Amdahl over each target's share there with its best
    kernel's speedup over the mode; a kernel slower than the mode counts as left out (1x), as
    verify leaves out what does not help."""
    if not have_state:
        return None, f"no whole-model estimate in {mode} mode without the state file"
    pairs = [(t.mode_share or 0.0, max(1.0, t.best_vs_mode or 1.0)) for t in targets]
    slower = [t.name for t in targets if t.best_vs_mode is not None and t.best_vs_mode < 1.0]
    note = f"best kernels that beat {mode} in place of it, the rest of the model as in {mode}"
    if slower:
        note += f"; left out, slower than {mode}: {', '.join(slower)}"
    return amdahl(pairs), note


def _estimate(targets: list[TargetReport], have_state: bool) -> tuple[float | None, str]:
    if not have_state:
        return None, "no whole-model estimate: shares of the model's time are unknown without " \
                     "the state file (.autokernel/state.json)"  # fmt: skip
    pairs = [(t.share or 0.0, t.speedup_in_model or t.speedup_vs_eager) for t in targets]
    total = sum(share for share, _ in pairs)
    note = (
        f"assumes each target's best kernel replaces eager PyTorch with its measured speedup at "
        f"the benchmark sizes, over {total:.0%} of the model's time; the rest runs unchanged"
    )
    if any(t.speedup_in_model for t in targets):
        note += (" (where the plan gives the model's own time for a target, the speedup is over"
                 " that time at the model's shape)")  # fmt: skip
    if len(targets) == 1 and targets[0].share == 1.0:
        note += " (share 1.0 is the `--kernel` default: profile the model for its real share)"
    if total > 1.0 + 1e-9:
        note += f" (the shares sum to {total:.2f} > 1: scaled to 1, no rest assumed)"
    return amdahl(pairs), note
