"""How many experiments per hour do parallel workers buy? `autokernel run --agent tuner` for a
fixed short time with each --workers count in turn, then experiments per hour from each run's
own files (results.tsv, run.log, .autokernel/workers.jsonl), written as one markdown table.

    python benchmarks/workers.py --out-dir $OUT --commit SHA            # 1 and 2 workers, ~2 min
    python benchmarks/workers.py --out-dir $OUT --commit SHA --workers 1,2,4,8 --seconds 60

On a machine with fewer GPUs than workers, worker i uses GPU i mod the count: with one GPU,
`--workers 2` measures two workers sharing it (one compiles or checks while the other times).
The steady rate leaves out experiment 0 (the starter, which also measures the baselines once
per machine and size: the first run would pay for the second); the whole-run rate counts
everything the loop's clock saw. Each run is cut after --seconds plus RUN_GRACE_S, so the
script's wall time is bounded by len(workers) x (seconds + RUN_GRACE_S) plus a few seconds.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time
from datetime import datetime
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

from autokernel.run.results import ResultsLog  # noqa: E402
from autokernel.run.worker_log import WorkerLog, summarize  # noqa: E402
from benchmarks import runner  # noqa: E402

RUN_GRACE_S = 30  # start-up (imports, worker pool), the starter, and draining the last jobs
ROW_LINE = re.compile(r"^(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d) exp (\d+) \[[^\]]+\] (\w+) ")


def run_once(workers: int, seconds: float, kernel: str, work: Path, extra: list[str]) -> dict:
    ws = work / f"ws-w{workers}"
    cmd = [sys.executable, "-m", "autokernel.cli", "run", "--kernel", kernel, "--agent", "tuner",
           "--hours", f"{seconds / 3600:.6f}", "--quiet", "--tag", f"w{workers}",
           "--workspace", str(ws), *extra]  # fmt: skip
    if workers:
        cmd += ["--workers", str(workers)]
    env = {**os.environ, "AUTOKERNEL_CACHE_DIR": str(work / "cache")}
    t0 = time.monotonic()
    try:
        out = subprocess.run(cmd, capture_output=True, text=True, env=env, cwd=ROOT,
                             timeout=seconds + RUN_GRACE_S)  # fmt: skip
        code, tail = out.returncode, (out.stdout + out.stderr)[-1500:]
    except subprocess.TimeoutExpired as exc:
        code, tail = "cut", str(exc.stdout or "")[-1500:]
    wall = time.monotonic() - t0
    return {"workers": workers, "exit": code, "wall_s": round(wall, 1), "tail": tail,
            **measure(ws)}  # fmt: skip


def measure(ws: Path) -> dict:
    rows = ResultsLog(ws / "results.tsv").read()
    try:
        loop_s = json.loads((ws / ".autokernel" / "state.json").read_text())["seconds"]
    except (OSError, ValueError, KeyError):
        loop_s = None
    stamps = {}  # experiment -> when its row was written (run.log, 1 s resolution)
    log = ws / ".autokernel" / "run.log"
    for line in log.read_text().splitlines() if log.exists() else []:
        m = ROW_LINE.match(line)
        if m and m.group(3) in ("keep", "revert", "fail", "crash", "timeout", "rejected"):
            stamps[int(m.group(2))] = datetime.strptime(m.group(1), "%Y-%m-%d %H:%M:%S")
    steady = None
    if len(stamps) >= 3 and 0 in stamps:
        span = (max(stamps.values()) - stamps[0]).total_seconds()
        steady = 3600.0 * (len(stamps) - 1) / span if span > 0 else None
    harness = [float(r["harness_s"]) for r in rows if r.get("harness_s", "-") != "-"]
    slots, _ = summarize(WorkerLog(ws).read())
    keys = ("slot", "where", "evaluations", "other_jobs", "lost", "status")
    return {
        "experiments": len(rows),
        "passed": sum(r.get("correctness", "").startswith("PASS") for r in rows),
        "loop_s": loop_s,
        "per_hour": 3600.0 * len(rows) / loop_s if loop_s else None,
        "steady_per_hour": steady,
        "harness_median_s": statistics.median(harness) if harness else None,
        "slots": [{k: getattr(s, k) for k in keys} for s in slots],
    }


def fmt(x: float | None, spec: str = ".0f") -> str:
    return "-" if x is None else format(x, spec)


def markdown(runs: list[dict], args: argparse.Namespace, gpu: str, versions: str) -> str:
    lines = [
        f"# Parallel workers: `autokernel run --agent tuner --kernel {args.kernel}`, {gpu} "
        f"({datetime.now():%Y-%m-%d})",
        "",
        f"- commit: {args.commit}. {versions}. GPUs visible: {args.gpus}.",
        f"- command: `{' '.join(sys.argv)}`; each run `--hours {args.seconds / 3600:.6f}` "
        f"({args.seconds:g} s of loop time){' ' + ' '.join(args.extra) if args.extra else ''}.",
        "- experiments per hour: whole run = rows / the loop's seconds (state.json); steady = "
        "rows after experiment 0 / the time from its row to the last row (run.log).",
        "- workers share GPUs when there are more workers than GPUs (worker i: GPU i mod count).",
        "",
        "| workers | experiments | passed | loop s | exp/h (whole run) | exp/h (steady) | "
        "harness s (median) | lost | exit |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for r in runs:
        lost = sum(s["lost"] for s in r["slots"])
        lines.append(
            f"| {r['workers'] or 'sequential'} | {r['experiments']} | {r['passed']} | "
            f"{fmt(r['loop_s'], '.1f')} | {fmt(r['per_hour'])} | {fmt(r['steady_per_hour'])} | "
            f"{fmt(r['harness_median_s'], '.2f')} | {lost} | {r['exit']} |"
        )
    base = next((r for r in runs if r["workers"] == 1), runs[0])
    lines += ["", "Per worker (evaluations of experiments; other jobs: starters, calibrations, "
              "interleaved comparisons):", ""]  # fmt: skip
    for r in runs:
        per = ", ".join(f"{s['slot']} ({s['where']}): {s['evaluations']} + {s['other_jobs']}"
                        + (f", {s['status']}" if s["status"] != "ok" else "")
                        for s in r["slots"])  # fmt: skip
        gain = (r["steady_per_hour"] / base["steady_per_hour"]
                if r["steady_per_hour"] and base["steady_per_hour"] else None)  # fmt: skip
        label = f"{r['workers']} worker(s)" if r["workers"] else "sequential"
        lines.append(f"- {label}: {per or '-'}; steady rate "
                     f"{fmt(gain, '.2f')}x that of {base['workers']} worker(s)")  # fmt: skip
    return "\n".join(lines) + "\n"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out-dir", type=Path, required=True)
    ap.add_argument("--workers", default="1,2", help="counts to run, e.g. 1,2,8 (0: sequential)")
    ap.add_argument("--seconds", type=float, default=35.0, help="loop time of each run")
    ap.add_argument("--kernel", default="rmsnorm")
    ap.add_argument("--prefix", default="h200", help="file name prefix: <prefix>-workers-DATE")
    ap.add_argument("extra", nargs="*", help="more `autokernel run` flags, after --")
    args = runner.add_arguments(ap).parse_args()
    args.commit = args.commit or runner.tree_commit()
    import torch

    args.gpus = torch.cuda.device_count()
    gpu = torch.cuda.get_device_name() if args.gpus else "CPU (Triton interpreter)"
    import triton

    versions = f"torch {torch.__version__}, triton {triton.__version__}"
    args.out_dir.mkdir(parents=True, exist_ok=True)
    stem = args.out_dir / f"{args.prefix}-workers-{datetime.now():%Y-%m-%d}"
    runs = []
    with tempfile.TemporaryDirectory(prefix="ak-workers-") as work:
        for n in (int(x) for x in args.workers.split(",")):
            runs.append(run_once(n, args.seconds, args.kernel, Path(work), args.extra))
            stem.with_suffix(".json").write_text(json.dumps(runs, indent=1) + "\n")
            stem.with_suffix(".md").write_text(markdown(runs, args, gpu, versions))
            print(f"{n} worker(s): {runs[-1]['experiments']} experiments, "
                  f"{fmt(runs[-1]['steady_per_hour'])}/h steady", flush=True)  # fmt: skip
    rows = [{k: v for k, v in r.items() if k != "tail"} for r in runs]
    runner.record("workers", rows, markdown(runs, args, gpu, versions), commit=args.commit,
                  results=args.results, extra={"kernel": args.kernel, "seconds": args.seconds})  # fmt: skip
    print(stem.with_suffix(".md").read_text())
    return 0


if __name__ == "__main__":
    sys.exit(main())
