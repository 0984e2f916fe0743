"""How close honest kernels come to the judge's wall-clock limit, and what judging costs.

Evaluates each starter in kernels/ through the sandbox (worker + judge, as `run` does) and prints,
per benchmark size: the median the kernel's process claimed, the judge's own wall time per call
over a batch of back-to-back calls, the limit it is held to (benchmark.wall_limit_us) and
wall / limit (an honest kernel must stay well below 1). Also the verdict, the harness seconds
and the benchmark phase's seconds, so the cost of the cross-check is visible.

    python -m benchmarks.judge_margins [--types softmax,reduce] [--quick]

On the CPU (the interpreter) only the mechanics are checked: use --types reduce --quick.
Prints one JSON line per size, then a Markdown table.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def main(argv: list[str]) -> int:
    from autokernel.harness.benchmark import wall_limit_us
    from autokernel.harness.sandbox import Options, evaluate
    from autokernel.specs import SPECS
    from benchmarks import runner

    parser = runner.add_arguments(argparse.ArgumentParser(description=__doc__.splitlines()[0]))
    parser.add_argument("--types", default=",".join(SPECS), help="comma-separated kernel types")
    parser.add_argument("--quick", action="store_true", help="first benchmark size only")
    args = parser.parse_args(argv)
    rows = []
    for kind in args.types.split(","):
        path = ROOT / "kernels" / f"{kind}.py"
        if kind not in SPECS or not path.exists():
            print(f"unknown kernel type {kind!r}; use some of {', '.join(SPECS)}", file=sys.stderr)
            return 2
        v = evaluate(path, Options(seed=1, quick=args.quick, compile_baseline=False))
        on_gpu = not v.interpreter
        base = {"type": kind, "status": v.status.value, "harness_s": round(v.harness_s, 2),
                "benchmark_s": v.phase_s.get("benchmark")}  # fmt: skip
        if not v.timings:
            rows.append({**base, "message": v.message})
            print(json.dumps(rows[-1]), flush=True)
        for t in v.timings:
            limit = wall_limit_us(t.us, on_gpu)
            wall = t.judge_wall_us or 0.0
            rows.append({**base, "size": t.size, "claimed_us": round(t.us, 2),
                         "judge_wall_us": round(wall, 2), "limit_us": round(limit, 2),
                         "wall_over_limit": round(wall / limit, 3)})  # fmt: skip
            print(json.dumps(rows[-1]), flush=True)
    table = runner.table(rows, ["type", "status", "size", "claimed_us", "judge_wall_us",
                                "limit_us", "wall_over_limit", "harness_s", "benchmark_s"])  # fmt: skip
    runner.record("judge_margins", rows, table, commit=args.commit, results=args.results)
    print("\n" + table)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
