"""progress.png: each target's speedup over the night, one panel per target.

matplotlib is optional (`pip install 'torch-autokernel[report]'`): it is imported only here, and its
object API with the Agg canvas is used rather than pyplot, so drawing never changes the
backend or global state of a process that imported autokernel as a library.
"""

from __future__ import annotations

from pathlib import Path

from autokernel.report import BASELINE_AGENTS, Report, TargetReport

STATUS_COLOURS = {  # keep stands out; failures are warm so a crash loop is seen at a glance
    "keep": "#1a9850",
    "revert": "#9e9e9e",
    "fail": "#d73027",
    "crash": "#7b3294",
    "timeout": "#fdae61",
    "rejected": "#c51b7d",
}
FAILED_Y = 0.03  # axes fraction where untimed experiments are drawn, on the panel's floor
PANEL_HEIGHT_IN = 3.0
WIDTH_IN = 10.0
DPI = 110


class PlotUnavailable(ImportError):
    """matplotlib is not installed."""


def _panel(ax, t: TargetReport) -> None:
    """One target: dots per experiment by status, the kept best as a step line, references."""
    from matplotlib.ticker import MaxNLocator

    timed = [p for p in t.points if p.speedup is not None]
    untimed = [p for p in t.points if p.speedup is None]
    for status, colour in STATUS_COLOURS.items():
        pts = [p for p in timed if p.status == status]
        if status == "keep":  # the starter and its re-measurements are not proposals
            base = [p for p in pts if p.agent in BASELINE_AGENTS]
            pts = [p for p in pts if p.agent not in BASELINE_AGENTS]
            if base:
                ax.scatter(
                    [p.experiment for p in base], [p.speedup for p in base], s=34, marker="D",
                    facecolors="white", edgecolors=colour, linewidths=1.2, zorder=4,
                    label="starter / best re-measured",
                )  # fmt: skip
        if pts:
            big = status == "keep"
            ax.scatter(
                [p.experiment for p in pts], [p.speedup for p in pts], s=60 if big else 18,
                color=colour, label="kept proposal" if big else status, zorder=5 if big else 3,
                edgecolors="black" if big else "white", linewidths=0.6 if big else 0.3,
            )  # fmt: skip
            for p in pts if big else ():
                ax.annotate(
                    f"exp {p.experiment}", (p.experiment, p.speedup), xytext=(0, 7),
                    textcoords="offset points", ha="center", fontsize=7.5, color=colour,
                )  # fmt: skip
        bad = [p for p in untimed if p.status == status]
        if bad:
            ax.scatter(
                [p.experiment for p in bad], [FAILED_Y] * len(bad), marker="x", s=30,
                color=colour, label=f"{status} (no timing)", zorder=3,
                transform=ax.get_xaxis_transform(),
            )  # fmt: skip
    steps = [(p.experiment, p.speedup) for p in timed if p.status == "keep"]
    if steps:
        last = max(p.experiment for p in t.points)
        xs = [x for x, _ in steps] + [last]
        ys = [y for _, y in steps] + [steps[-1][1]]
        ax.step(xs, ys, where="post", color="#1a9850", linewidth=1.6, label="best so far", zorder=2)
    base = f" = {t.baseline_us:.4g} µs" if t.baseline_us is not None else ""
    ax.axhline(1.0, color="black", linewidth=0.8, zorder=1, label=f"starter (1.0{base})")
    # Eager PyTorch and torch.compile in the same units: starter µs / their µs.
    for ref, label, style in (
        (t.baseline_vs_eager, "eager PyTorch", "--"),
        (t.baseline_vs_compile, "torch.compile", ":"),
    ):
        if ref:
            ax.axhline(1.0 / ref, color="#4575b4", linewidth=1.0, linestyle=style, label=label)
    lo, hi = ax.get_ylim()  # room for the labels above the top dot and the lines at the edges
    ax.set_ylim(lo - 0.05 * (hi - lo), hi + 0.1 * (hi - lo))
    title = t.name if t.name.startswith(t.kernel_type) else f"{t.name} ({t.kernel_type})"
    if t.best_us is not None:
        title += (
            f": best {t.best_us:.4g} µs = {t.speedup_vs_starter or 1:.2f}x starter, "
            f"{_x(t.speedup_vs_eager)} eager, {_x(t.speedup_vs_compile)} torch.compile"
        )
    title += f" · {t.kept} kept, {t.reverted} reverted, {t.failed} failed"
    ax.set_title(title, fontsize=9.5, loc="left")
    ax.set_ylabel("speedup vs starter (×)")
    ax.xaxis.set_major_locator(MaxNLocator(integer=True))  # experiment numbers are whole
    first, last = t.points[0].experiment, t.points[-1].experiment
    if first == last:
        ax.set_xlim(first - 1, last + 1)
    ax.grid(True, alpha=0.3)
    ax.legend(loc="center left", bbox_to_anchor=(1.01, 0.5), fontsize=8, frameon=False)


def _x(value: float | None) -> str:
    return "?x" if value is None else f"{value:.2f}x"


def write_png(report: Report, path: Path) -> Path:
    """Draw the report's targets into `path`; PlotUnavailable without matplotlib."""
    try:
        from matplotlib.backends.backend_agg import FigureCanvasAgg
        from matplotlib.figure import Figure
    except ImportError as exc:
        raise PlotUnavailable(str(exc)) from None
    targets = [t for t in report.targets if t.points]
    n = max(1, len(targets))
    fig = Figure(figsize=(WIDTH_IN, 1.0 + PANEL_HEIGHT_IN * n), dpi=DPI, layout="constrained")
    FigureCanvasAgg(fig)
    axes = fig.subplots(n, 1, squeeze=False)[:, 0]
    for ax, t in zip(axes, targets, strict=False):
        _panel(ax, t)
    if not targets:
        axes[0].text(0.5, 0.5, "no experiments yet", ha="center", va="center")
    axes[-1].set_xlabel("experiment number")
    names = ", ".join(t.name for t in targets) or "no targets"
    head = f"autokernel {report.tag}" if report.tag else "autokernel run"
    estimate = f" · whole model ≈ {report.amdahl:.2f}x vs eager" if report.amdahl else ""
    fig.suptitle(f"{head}: speedup per experiment — {names}{estimate}", fontsize=11)
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path)
    return path
