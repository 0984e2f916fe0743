"""`autokernel report`: autokernel.report builds the Report from the run's files, the views
draw it (terminal, Markdown, JSON, progress.png)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated

import typer

from autokernel.cli.errors import handled
from autokernel.mode import MODES
from autokernel.report import MATPLOTLIB_HINT, PNG_FILE, ReportError, build
from autokernel.views.console import output_console
from autokernel.views.plot import PlotUnavailable, write_png
from autokernel.views.report import to_markdown, view


def _write(path: Path, text: str) -> None:
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    except OSError as exc:
        raise ReportError(f"cannot write {path}: {exc}") from None


def report_command(
    workspace: Annotated[
        Path, typer.Option("--workspace", "-w", help="Directory of the run.")
    ] = Path("."),
    png: Annotated[
        Path | None,
        typer.Option("--png", help="Where to write the plot (default: next to results.tsv)."),
    ] = None,
    no_png: Annotated[bool, typer.Option("--no-png", help="Do not draw the plot.")] = False,
    json_out: Annotated[
        Path | None, typer.Option("--json", help="Also write the report as JSON here.")
    ] = None,
    markdown: Annotated[
        Path | None, typer.Option("--markdown", help="Also write a Markdown report here.")
    ] = None,
    mode: Annotated[
        str | None,
        typer.Option(help="Baseline of the estimate: eager or compile (default: the run's)."),
    ] = None,
) -> None:
    """The morning view: per target baseline, best, speedups, experiments kept/reverted/failed,
    time spent and why it moved on; the whole-model Amdahl estimate; progress.png."""
    console, err = output_console(), output_console(stderr=True)
    with handled():
        if mode is not None and mode not in MODES:
            raise ReportError(f"--mode {mode!r}: use one of {', '.join(MODES)}")
        report = build(workspace, mode)
        written: Path | None = None
        if not no_png:
            target = png or Path(report.results).parent / PNG_FILE
            try:
                written = write_png(report, target)
            except PlotUnavailable:
                hint = f"no progress.png: matplotlib is not installed — {MATPLOTLIB_HINT}"
                err.print(hint, style="yellow", markup=False, highlight=False, soft_wrap=True)
            except OSError as exc:
                raise ReportError(f"cannot write {target}: {exc}") from None
        if json_out is not None:
            data = report.to_json() | {"png": str(written) if written else None}
            _write(json_out, json.dumps(data, indent=1) + "\n")
        if markdown is not None:
            _write(markdown, to_markdown(report, written))
    console.print(view(report, written), highlight=False)
