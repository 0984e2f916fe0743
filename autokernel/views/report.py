"""How a report looks: the terminal tables and the markdown file (report.py builds the data)."""

from __future__ import annotations

from pathlib import Path

from rich import box
from rich.console import Group
from rich.table import Table
from rich.text import Text

from autokernel.report import Report, TargetReport


def _f(x: float | None, spec: str = ".2f", suffix: str = "") -> str:
    return "-" if x is None else f"{x:{spec}}{suffix}"


def _duration(seconds: float, short: bool = False) -> str:
    if seconds >= 5400:
        return f"{seconds / 3600:.1f}{'h' if short else ' h'}"
    return f"{seconds / 60:.0f}{'m' if short else ' min'}"


def _headline(r: Report) -> str:
    parts = [f"run {r.tag}" if r.tag else "run (no state file)", f"{r.rows} experiments"]
    if r.agent:
        parts.insert(1, f"agent {r.agent}")
    if r.seconds is not None and r.hours is not None:
        parts.append(f"{_duration(r.seconds)} of {r.hours:g} h")
    return " · ".join(parts)


COLUMNS = ("target", "type", "share", "starter µs", "best µs", "×starter", "×eager",
           "×compile", "%peak", "kept", "reverted", "failed", "time")  # fmt: skip


# Two-line headers keep the table within 80 columns with room for the target's name.
TERMINAL = ("target", "share", "start\nµs", "best\nµs", "×\nstart", "×\neager", "×\ncompile",
            "%\npeak", "kept", "rev", "fail", "time")  # fmt: skip


def _cells(t: TargetReport, short: bool = False) -> list[str]:
    """The row of COLUMNS."""
    time = _duration(t.seconds, short) + ("" if t.seconds_source == "state" else "*")
    name = t.name + (f" [{t.best_backend}]" if t.best_backend == "cuda" else "")
    return [
        name, t.kernel_type, _f(t.share, ".0%"), _f(t.baseline_us, ".4g"), _f(t.best_us, ".4g"),
        _f(t.speedup_vs_starter), _f(t.speedup_vs_eager), _f(t.speedup_vs_compile),
        _f(t.pct_peak, ".0f"), str(t.kept), str(t.reverted), str(t.failed), time,
    ]  # fmt: skip


def _terminal_cells(t: TargetReport) -> list[str]:
    """The type folds into the name (names are the type or type_N) to save a column."""
    name, kind, *rest = _cells(t, short=True)
    return [name if name.startswith(kind) else f"{name} ({kind})", *rest]


def _why(t: TargetReport) -> str:
    """Status, why it moved on, where its best kernel is in git, what the baseline is."""
    parts = [] if t.status == "unknown" else [t.status]
    if t.reason:
        parts.append(f"moved on: {t.reason}")
    if t.optimized_commit:
        parts.append(f"best kernel: git show {t.optimized_commit[:12]}:optimized/{t.name}.py")
    elif t.best_commit and t.best_commit != "-":
        parts.append(f"best kernel: git show {t.best_commit[:12]}:kernel.py")
    parts.append(f"baseline: {t.baseline_note}")
    return f"{t.name}: " + "; ".join(parts)


def _estimate_line(r: Report) -> str:
    if r.amdahl is None:
        return r.amdahl_note
    return f"whole model (Amdahl): {r.amdahl:.3f}x vs eager — {r.amdahl_note}"


def _baseline(mode: str) -> str:
    return "torch.compile" if mode == "compile" else "eager"


def night_lines(r: Report) -> list[str]:
    """Where the night's time went and what it bought, per target, against the report's mode."""
    base = _baseline(r.mode)
    lines = [f"where the night went, against {base} (--mode {r.mode}):"]
    for t in sorted(r.targets, key=lambda t: -t.seconds):
        share = f"{t.mode_share:.0%} of the model in {r.mode}, " if t.mode_share is not None else ""
        lines.append(
            f"  {t.name}: {t.seconds / 60:.0f} min ({_f(t.night_share, '.0%')}), "
            f"{t.experiments} experiments, {t.kept} kept; {share}starter "
            f"{_f(t.starter_vs_mode, '.2f', 'x')} → best {_f(t.best_vs_mode, '.2f', 'x')} "
            f"vs {base} ({_f(t.speedup_vs_starter, '.2f', 'x')} vs the starter)"
        )
    if r.mode_estimate is not None:
        lines.append(f"whole model in {r.mode}: {r.mode_estimate:.3f}x vs {base} — {r.mode_note}")
    else:
        lines.append(r.mode_note)
    return lines


def rate_line(r: Report) -> str | None:
    if r.per_hour is None or r.seconds is None:
        return None
    return (f"experiments per hour: {r.per_hour:.0f} ({r.rows} experiments in "
            f"{_duration(r.seconds)} of loop time)")  # fmt: skip


WORKER_COLUMNS = ("worker", "where", "experiments", "other jobs", "lost", "busy", "exp/h", "check")


def worker_cells(r: Report) -> list[list[str]]:
    """One row per parallel slot (none for a run on one GPU): what it evaluated, how busy it
    was, what was lost, and how it timed the best kernel against the other slots."""
    span = r.workers_span_s
    out = []
    for w in r.workers:
        rate = 3600.0 * w["evaluations"] / span if span > 0 else None
        check = w["status"] + (f": {w['note']}" if w["status"] != "ok" else "")
        busy = f"{w['busy_s'] / span:.0%}" if span > 0 else "-"
        out.append([w["slot"], w["where"] or "-", str(w["evaluations"]), str(w["other_jobs"]),
                    str(w["lost"]), busy, _f(rate, ".0f"), check])  # fmt: skip
    return out


def view(r: Report, png: Path | None = None) -> Group:
    """The terminal rendering."""
    table = Table(
        title=_headline(r), title_justify="left", box=box.SIMPLE_HEAD, show_edge=False,
        pad_edge=False, padding=(0, 1, 0, 0),
    )  # fmt: skip
    shares = any(t.share is not None for t in r.targets)  # else the column is all "-"
    keep = [i for i, col in enumerate(TERMINAL) if shares or col != "share"]
    for i in keep:
        col = TERMINAL[i]
        if col == "target":  # the one column that must never be squeezed out
            width = max([len(col), *(len(t.name) for t in r.targets)])
            table.add_column(col, no_wrap=True, min_width=min(width, 24), max_width=24)
        else:
            table.add_column(col, justify="right", overflow="fold")
    for t in r.targets:
        cells = _terminal_cells(t)
        table.add_row(*(Text(cells[i]) for i in keep))  # names are data, not markup
    parts: list = [table]
    parts += [Text(_why(t), "dim") for t in r.targets]
    if any(t.seconds_source != "state" for t in r.targets):
        parts.append(Text("* harness time only (no state file for this target)", "dim"))
    parts.append(Text(_estimate_line(r), "bold" if r.amdahl else "yellow"))
    parts += [Text(line, "bold" if i == 0 else "") for i, line in enumerate(night_lines(r))]
    if rate_line(r):
        parts.append(Text(rate_line(r) or ""))
    if r.workers:
        slots = Table(title="workers", title_justify="left", box=box.SIMPLE_HEAD,
                      show_edge=False, pad_edge=False, padding=(0, 1, 0, 0))  # fmt: skip
        for col in WORKER_COLUMNS:
            slots.add_column(
                col, justify="left" if col in ("worker", "where", "check") else "right"
            )
        for cells in worker_cells(r):
            slots.add_row(*map(Text, cells))
        parts.append(slots)
    if r.top_kept:
        top = Table(
            title="top kept experiments", title_justify="left", box=box.SIMPLE_HEAD,
            show_edge=False, pad_edge=False, padding=(0, 1, 0, 0),
        )  # fmt: skip
        for col in ("exp", "target", "gain", "×starter", "hypothesis"):
            top.add_column(col, justify="right" if col != "hypothesis" else "left")
        for k in r.top_kept:
            cells = (str(k.experiment), k.target, _f(k.gain, ".3f"), _f(k.speedup_vs_starter),
                     k.description)  # fmt: skip
            top.add_row(*map(Text, cells))
        parts.append(top)
    else:
        parts.append(Text("no proposal was kept yet: the best kernels are the starters"))
    if r.ended:
        parts.append(Text(f"last stop: {r.ended}", "dim"))
    parts += [Text(n, "yellow") for n in r.notes]
    if png is not None:
        parts.append(Text(f"progress plot: {png}"))
    return Group(*parts)


def _md(text: str) -> str:
    return text.replace("|", "\\|")


def to_markdown(r: Report, png: Path | None = None) -> str:
    """A report a user can paste into an issue."""
    lines = [f"## autokernel report — {_headline(r)}", ""]
    lines += ["| " + " | ".join(COLUMNS) + " |", "|" + "---|" * len(COLUMNS)]
    lines += ["| " + " | ".join(_md(c) for c in _cells(t)) + " |" for t in r.targets]
    lines += [""] + [f"- {_md(_why(t))}" for t in r.targets]
    lines += ["", f"**{_md(_estimate_line(r))}**" if r.amdahl else _md(_estimate_line(r)), ""]
    night = night_lines(r)
    lines += [f"### {_md(night[0].rstrip(':'))}", ""] + [f"- {_md(n.strip())}" for n in night[1:]]
    lines.append("")
    if rate_line(r):
        lines += [_md(rate_line(r) or ""), ""]
    if r.workers:
        lines += ["### Workers", "", "| " + " | ".join(WORKER_COLUMNS) + " |",
                  "|" + "---|" * len(WORKER_COLUMNS)]  # fmt: skip
        lines += ["| " + " | ".join(_md(c) for c in cells) + " |" for cells in worker_cells(r)]
        lines.append("")
    if r.top_kept:
        lines += ["### Top kept experiments", "", "| exp | target | gain | ×starter | hypothesis |",
                  "|---|---|---|---|---|"]  # fmt: skip
        lines += [
            f"| {k.experiment} | {_md(k.target)} | {_f(k.gain, '.3f')} | "
            f"{_f(k.speedup_vs_starter)} | {_md(k.description)} |"
            for k in r.top_kept
        ]
        lines.append("")
    extra = ([f"last stop: {r.ended}"] if r.ended else []) + r.notes
    lines += [f"- {_md(n)}" for n in extra] + ([""] if extra else [])
    if png is not None:
        lines += [f"![progress]({png.name})", ""]
    return "\n".join(lines)
