"""The one way a benchmark records what it measured: every script declares its cases and
measures them, then hands its rows and its Markdown to `record`, which appends one line to
`benchmarks/results/<gpu>.jsonl` (the history: date, GPU, torch/Triton/Python versions, commit,
the command that produced it) and regenerates `benchmarks/results/latest.md`, the newest run of
each question on each GPU. Files other work reads by name (`h200-latest.json`,
`h200-models-latest.json`) are still written by their scripts beside it.

Run every script from the repository root as a module (`python -m benchmarks.models ...`): the
GPU machine's copy of the tree is not installed, and `-m` puts the root on sys.path.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import platform
import re
import shlex
import subprocess
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "benchmarks" / "results"
LATEST = "latest.md"


def add_arguments(ap: argparse.ArgumentParser) -> argparse.ArgumentParser:
    """The options every script shares: the commit (the GPU machine has no git) and where the
    history goes. A GPU run records into benchmarks/results by default; a CPU run (a smoke
    check, interpreter figures) records only where --results says, so it never lands beside
    the GPU figures by accident."""
    import torch

    default = RESULTS if torch.cuda.is_available() else None
    ap.add_argument("--commit", default=None, help="commit of the tree (default: git's HEAD)")
    ap.add_argument("--results", type=Path, default=default,
                    help="folder of the <gpu>.jsonl histories and latest.md")  # fmt: skip
    return ap


def tree_commit() -> str:
    try:
        out = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT,
                             capture_output=True, text=True, timeout=10)  # fmt: skip
        return out.stdout.strip() or "unknown"
    except (OSError, subprocess.SubprocessError):
        return "unknown"


def gpu_name() -> str:
    import torch

    return torch.cuda.get_device_name() if torch.cuda.is_available() else "cpu"


def slug(gpu: str) -> str:
    """ "NVIDIA H200" -> "h200", "NVIDIA GeForce RTX 4090" -> "rtx-4090", "cpu" -> "cpu"."""
    name = re.sub(r"^(nvidia|amd)\s+|geforce\s+|instinct\s+", "", gpu.strip().lower())
    return re.sub(r"[^a-z0-9]+", "-", name).strip("-") or "unknown"


def environment(commit: str | None = None) -> dict[str, Any]:
    """Where and with what a figure was measured."""
    import torch

    try:
        import triton

        triton_version = triton.__version__
    except ImportError:
        triton_version = None
    return {
        "date": dt.datetime.now(dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
        "gpu": gpu_name(),
        "torch": torch.__version__,
        "triton": triton_version,
        "python": platform.python_version(),
        "commit": commit or tree_commit(),
        "command": command(),
    }


def command() -> str:
    """How this run was started, as one would type it again from the repository root."""
    script = Path(sys.argv[0]).resolve()
    if script.parent == ROOT / "benchmarks":
        head = ["python", "-m", f"benchmarks.{script.stem}"]
    else:
        head = [os.path.relpath(sys.argv[0], ROOT)]
    return shlex.join([*head, *sys.argv[1:]])


def record(
    question: str,
    rows: list[dict[str, Any]],
    markdown: str,
    *,
    commit: str | None = None,
    results: Path | None = RESULTS,
    extra: dict[str, Any] | None = None,
) -> Path | None:
    """Append this run to the GPU's history and regenerate latest.md; the history file (None:
    no folder given, nothing recorded)."""
    if results is None:
        return None
    entry = {"question": question, **environment(commit), **(extra or {}), "rows": rows,
             "markdown": markdown}  # fmt: skip
    results.mkdir(parents=True, exist_ok=True)
    path = results / f"{slug(entry['gpu'])}.jsonl"
    with path.open("a", encoding="utf-8") as f:
        f.write(json.dumps(entry, allow_nan=True) + "\n")
        f.flush()
        os.fsync(f.fileno())
    write_latest(results)
    return path


RUN_KEYS = ("gpu", "question", "date")  # what latest() files a run under


def history(results: Path = RESULTS) -> list[dict[str, Any]]:
    """Every recorded run, oldest first within each GPU's file."""
    runs = []
    for path in sorted(results.glob("*.jsonl")):
        for line in path.read_text(encoding="utf-8").splitlines():
            try:
                run = json.loads(line) if line.strip() else None
            except json.JSONDecodeError:  # a line cut by a full disk or a killed writer
                continue
            # Other .jsonl files may sit in the folder (a night's log copied in): a run is
            # a record that names its GPU, question and date.
            if isinstance(run, dict) and all(isinstance(run.get(k), str) for k in RUN_KEYS):
                runs.append(run)
    return runs


def latest(runs: list[dict[str, Any]]) -> dict[tuple[str, str], dict[str, Any]]:
    """The newest run of each (GPU, question). Lines converted from the result files of before
    the runner (they carry `converted_from`) are history only: newer runs of those days are
    still the dated files beside them."""
    newest: dict[tuple[str, str], dict[str, Any]] = {}
    for run in runs:
        if run.get("converted_from"):
            continue
        key = (run["gpu"], run["question"])
        if key not in newest or run["date"] >= newest[key]["date"]:
            newest[key] = run
    return newest


def write_latest(results: Path = RESULTS) -> Path:
    lines = ["# Latest benchmark runs", "",
             "Generated by benchmarks/runner.py from the `<gpu>.jsonl` histories beside it: the "
             "newest run of each question on each GPU. Do not edit by hand. Runs from before the "
             "runner (2026-12-03) are the dated files in this folder.", ""]  # fmt: skip
    for (gpu, question), run in sorted(latest(history(results)).items()):
        lines += [
            f"## {gpu}: {question}",
            "",
            f"{run['date']}, torch {run['torch']}, Triton {run['triton']}, Python "
            f"{run['python']}, commit {run['commit']}: `{run['command']}`",
            "",
            run["markdown"].strip(),
            "",
        ]
    path = results / LATEST
    path.write_text("\n".join(lines), encoding="utf-8")
    return path


def table(rows: list[dict[str, Any]], columns: list[str] | None = None) -> str:
    """A Markdown table of the rows (for scripts whose rows are their whole story)."""
    if not rows:
        return "(no rows)"
    columns = columns or list(dict.fromkeys(k for r in rows for k in r))
    out = ["| " + " | ".join(columns) + " |", "|" + "---|" * len(columns)]
    for r in rows:
        out.append(
            "| " + " | ".join("-" if r.get(c) is None else str(r[c]) for c in columns) + " |"
        )
    return "\n".join(out)
