"""What a CUDA night and a backend-switch run did, read from their workspaces after the fact:
the night's start and best kernel with their share of the copy ceiling, where its time went, and
for the switch run which backend each experiment was judged on.

The runs themselves are the CLI as a user types it (they may span several device calls, joined
by `--resume`):

    autokernel run --kernel cross_entropy --shape 8192x50257 --backend cuda --hours 0.25 -w NIGHT
    autokernel run --kernel rmsnorm --backend any --max-experiments 3 --agent command \\
        --agent-command "python benchmarks/switch_agent.py" -w SWITCH
    python -m benchmarks.cuda_night --night NIGHT --switch SWITCH --out-dir DIR --commit SHA

Run this step on the GPU that ran the workspaces: the record names the GPU and versions of the
process that writes it. Writes DIR/<gpu>-cuda-night-<date>-<commit>.md and .json (rows as
h200-latest.json has them, with "backend"), and one runner record ("cuda_night").
"""

from __future__ import annotations

import argparse
import csv
import datetime as dt
import itertools
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

from benchmarks import runner


def experiments(workspace: Path) -> list[dict[str, str]]:
    """results.tsv's rows, oldest first; [] when the run left none."""
    path = workspace / "results.tsv"
    if not path.is_file():
        return []
    with path.open(newline="", encoding="utf-8") as f:
        return list(csv.DictReader(f, delimiter="\t"))


def _us(row: dict[str, str]) -> float | None:
    try:
        value = float(row.get("latency_us", ""))
    except ValueError:
        return None
    return value if value > 0 else None


def morning_report(workspace: Path) -> dict[str, Any]:
    """`autokernel report --json` of the workspace, as the user would read it; {} if it fails."""
    out = workspace / ".autokernel" / "cuda-night-report.json"
    proc = subprocess.run(
        [sys.executable, "-m", "autokernel", "report", "-w", str(workspace), "--no-png",
         "--json", str(out)],
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    if proc.returncode != 0 or not out.is_file():
        return {"error": (proc.stderr or proc.stdout).strip()[-400:]}
    return json.loads(out.read_text(encoding="utf-8"))


def shapes(workspace: Path) -> dict[str, str]:
    """Each target's benchmark shapes as the run was asked for them (--shape), by name."""
    try:
        state = json.loads((workspace / ".autokernel" / "state.json").read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError):
        return {}
    out = {}
    for t in state.get("targets", []):
        spec = t.get("target", {})
        out[spec.get("name", "")] = "; ".join(
            "x".join(str(v) for v in s.values()) if isinstance(s, dict) else str(s)
            for s in spec.get("shapes", [])
        )
    return out


def night_markdown(rows: list[dict[str, str]], report: dict[str, Any],
                   shape: dict[str, str]) -> list[str]:  # fmt: skip
    lines = ["## The night", ""]
    if not rows:
        return [*lines, "no experiment was recorded", ""]
    if "error" in report:
        lines += [f"`autokernel report` failed: {report['error']}", ""]
    lines += ["| target | shape | best backend | start µs | best µs | × start | % of peak "
              "(best) | experiments | kept | reverted | failed | minutes | best kernel |",
              "|---|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|"]  # fmt: skip
    for t in report.get("targets", []):
        lines.append(
            f"| {t['name']} | {shape.get(t['name'], '-') or '-'} | {t.get('best_backend')} | "
            f"{t.get('baseline_us')} | {t.get('best_us')} | {t.get('speedup_vs_starter')} | "
            f"{t.get('pct_peak')} | {t.get('experiments')} | {t.get('kept')} | "
            f"{t.get('reverted')} | {t.get('failed')} | {(t.get('seconds') or 0) / 60:.1f} | "
            f"`git show {t.get('best_commit')}:kernel.py` |"
        )
    lines += ["", f"stopped: {report.get('ended', '?')}; loop time "
              f"{(report.get('seconds') or 0) / 60:.1f} min of {report.get('hours')} h", "",
              *experiment_table(rows, NIGHT_COLUMNS)]  # fmt: skip
    return [*lines, ""]


def switch_markdown(rows: list[dict[str, str]]) -> list[str]:
    lines = ["## The backend switch (LLM-free command agent)", ""]
    if not rows:
        return [*lines, "no experiment was recorded", ""]
    backends = [r.get("backend", "") for r in rows]
    judged = sorted({b for b, r in zip(backends, rows, strict=True)
                     if r.get("correctness") in ("PASS", "FAIL")})  # fmt: skip
    switched = sum(1 for a, b in itertools.pairwise(backends) if a != b)
    lines += [f"backends judged: {', '.join(judged) or 'none'}; switches between consecutive "
              f"experiments: {switched}", "",
              *experiment_table(rows, SWITCH_COLUMNS)]  # fmt: skip
    return [*lines, ""]


# results.tsv column -> heading, per table
NIGHT_COLUMNS = {"experiment": "exp", "status": "status", "backend": "backend",
                 "latency_us": "µs", "pct_peak": "% of peak", "harness_s": "harness s",
                 "description": "description"}  # fmt: skip
SWITCH_COLUMNS = {"experiment": "exp", "backend": "backend", "status": "status",
                  "correctness": "correctness", "latency_us": "µs", "description": "description"}  # fmt: skip


def experiment_table(rows: list[dict[str, str]], columns: dict[str, str]) -> list[str]:
    """One Markdown row per experiment; descriptions cut to 90 characters, pipes escaped."""
    lines = ["| " + " | ".join(columns.values()) + " |", "|" + "---|" * len(columns)]
    for row in rows:
        cells = [(row.get(c) or "").replace("|", "/")[:90] for c in columns]
        lines.append("| " + " | ".join(cells) + " |")
    return lines


def json_rows(rows: list[dict[str, str]], kind: str, shape: dict[str, str]) -> list[dict[str, Any]]:
    """Every timed experiment as a row of h200-latest.json's shape, plus its status."""
    out = []
    for row in rows:
        us = _us(row)
        if us is None:
            continue
        out.append({"op": row["kernel_type"], "shape": shape.get(row["target"], ""), "variant":
                    f"{kind} exp {row['experiment']}", "backend": row.get("backend", ""),
                    "us": us, "status": row["status"], "pct_peak": row.get("pct_peak", ""),
                    "commit": row["commit"]})  # fmt: skip
    return out


def main(argv: list[str] | None = None) -> int:
    ap = runner.add_arguments(argparse.ArgumentParser(description=__doc__.splitlines()[0]))
    ap.add_argument("--night", type=Path, help="workspace of the CUDA night")
    ap.add_argument("--switch", type=Path, help="workspace of the --backend any run")
    ap.add_argument("--night-command", default="", help="the night's command line(s), recorded")
    ap.add_argument("--out-dir", type=Path, required=True)
    args = ap.parse_args(argv)
    if not args.night and not args.switch:
        ap.error("give --night and/or --switch")
    commit = args.commit or runner.tree_commit()
    env = runner.environment(commit)
    night = experiments(args.night) if args.night else []
    switch = experiments(args.switch) if args.switch else []
    report = morning_report(args.night) if night else {}
    night_shape = shapes(args.night) if args.night else {}
    switch_shape = shapes(args.switch) if args.switch else {}
    md = [f"# CUDA night and backend switch ({env['gpu']})", "",
          f"torch {env['torch']}, Triton {env['triton']}, commit {commit}, {env['date']}", ""]  # fmt: skip
    if args.night_command:
        md += [f"night: `{args.night_command}`", ""]
    md += night_markdown(night, report, night_shape) if args.night else []
    md += switch_markdown(switch) if args.switch else []
    text = "\n".join(md)
    rows = json_rows(night, "night", night_shape) + json_rows(switch, "switch", switch_shape)
    stem = f"{runner.slug(env['gpu'])}-cuda-night-{dt.date.today().isoformat()}-{commit}"
    args.out_dir.mkdir(parents=True, exist_ok=True)
    (args.out_dir / f"{stem}.md").write_text(text, encoding="utf-8")
    data = {**env, "rows": rows, "report": report}
    (args.out_dir / f"{stem}.json").write_text(json.dumps(data, indent=1), encoding="utf-8")
    runner.record("cuda_night", rows, text, commit=commit, results=args.results)
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
