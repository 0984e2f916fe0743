"""Evaluate every shipped starter with the full harness and record what it says.

One call on the GPU machine: per type, the verdict (five stages), harness seconds (process
start included) cold (first evaluation: baselines measured and cached) and warm (what the loop
pays per experiment), latency, throughput, % of measured peak, speedup vs eager and
torch.compile. Writes a markdown table and the raw verdicts.

    python -m benchmarks.harness_report --out benchmarks/results/h200-harness-YYYY-MM-DD.md
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import statistics
import sys
from pathlib import Path

import torch
import triton

ROOT = Path(__file__).resolve().parents[1]

from autokernel.harness.sandbox import Options, evaluate  # noqa: E402
from autokernel.specs import SPECS  # noqa: E402
from benchmarks import runner  # noqa: E402


def render(rows: list, args: argparse.Namespace) -> list[str]:
    """The markdown report of the types evaluated so far (rewritten after each type, so a run
    cut short by a device limit still leaves its table)."""
    gpu = torch.cuda.get_device_name() if torch.cuda.is_available() else "cpu"
    lines = [
        f"# Harness on the shipped starters — {gpu}",
        "",
        f"- date: {dt.date.today().isoformat()}",
        f"- GPU: {gpu}; torch {torch.__version__}; triton {triton.__version__}; CUDA {torch.version.cuda}",
        f"- commit: {args.commit}",
        f"- command: `python -m benchmarks.harness_report {' '.join(sys.argv[1:])}`",
        f"- harness s = wall time of `evaluate()` (worker process start, imports, five stages, benchmark); "
        f"cold = first evaluation on the machine (baselines incl. torch.compile measured and cached), "
        f"warm = median of {args.warm_runs} later evaluations (what the loop pays per experiment).",
        "- µs = do_bench median, L2 flushed; % peak against the measured ceiling (copy bandwidth / bf16 matmul).",
        "",
        "| type | verdict (cold / warm) | harness s cold | harness s warm | size | dtype | µs | throughput | % peak | vs eager | vs compile |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    mem_warm = []
    for name, cold, warm, last in rows:
        warm_s = statistics.median(w.harness_s for w in warm) if warm else float("nan")
        if SPECS[name].bound == "memory" and warm:
            mem_warm.append(warm_s)
        verdict = f"{cold.status.value} / {'/'.join(w.status.value for w in warm)}"
        if not last.timings:
            lines.append(
                f"| {name} | {verdict} | {cold.harness_s:.1f} | {warm_s:.1f} | | | | | | | {last.message} |"
            )
        for i, t in enumerate(last.timings):
            head = (
                f"| {name} | {verdict} | {cold.harness_s:.1f} | {warm_s:.1f} "
                if i == 0
                else "| | | | "
            )
            f = lambda x, s="": "—" if x is None else f"{x:.2f}{s}"
            lines.append(
                head + f"| {t.size} | {t.dtype} | {t.us:.1f} | {t.throughput:.1f} {t.unit} | "
                f"{f(t.pct_peak, '%')} | {f(t.speedup_vs_eager, 'x')} | {f(t.speedup_vs_compile, 'x')} |"
            )
    if mem_warm:
        lines += [
            "",
            f"Memory-bound types, warm harness seconds: median {statistics.median(mem_warm):.1f} s "
            f"(goal ≤ 8 s), max {max(mem_warm):.1f} s.",
        ]
    return lines


def main() -> int:
    ap = runner.add_arguments(argparse.ArgumentParser(description=__doc__.splitlines()[0]))
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--types", default=",".join(SPECS))
    ap.add_argument("--warm-runs", type=int, default=3)
    args = ap.parse_args()
    args.commit = args.commit or runner.tree_commit()
    types = args.types.split(",")
    rows, verdicts = [], {}
    for name in types:
        path = ROOT / "kernels" / f"{name}.py"
        cold = evaluate(path, Options(seed=1))
        warm = [evaluate(path, Options(seed=2 + i)) for i in range(args.warm_runs)]
        verdicts[name] = {"cold": cold.to_json(), "warm": [w.to_json() for w in warm]}
        last = warm[-1] if warm else cold  # --warm-runs 0: the cold verdict's timings
        rows.append((name, cold, warm, last))
        print(
            f"{name}: cold {cold.status.value} {cold.harness_s:.1f}s; warm "
            f"{[w.status.value for w in warm]} {[round(w.harness_s, 1) for w in warm]}; {last.message}",
            flush=True,
        )
        args.out.with_suffix(".json").write_text(json.dumps(verdicts, indent=1))
        args.out.write_text("\n".join(render(rows, args)) + "\n")
    lines = render(rows, args)
    summary = [{"type": name, "cold": cold.status.value, "cold_s": round(cold.harness_s, 2),
                "warm": [w.status.value for w in warm],
                "warm_s": [round(w.harness_s, 2) for w in warm], "message": last.message}
               for name, cold, warm, last in rows]  # fmt: skip
    runner.record("harness_report", summary, "\n".join(lines), commit=args.commit,
                  results=args.results)  # fmt: skip
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    sys.exit(main())
