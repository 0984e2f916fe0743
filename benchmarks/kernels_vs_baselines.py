"""Our kernels beside eager PyTorch, torch.compile (max-autotune), Liger-Kernel and the copy
ceiling, at every type and size that issue 5's goals name: one device call, two files.

    python -m benchmarks.kernels_vs_baselines --out benchmarks/results/h200-YYYY-MM-DD.md \
        --json benchmarks/results/h200-latest.json --commit SHA [--kernels-dir optimized]

Why one script in one call: each goal compares our kernel with the best alternative, and only
figures taken on the same GPU, the same day, on the same inputs compare. Every variant gets a
rel err against the float64 reference on the same inputs, so a fast wrong kernel shows as wrong.
The device call is capped (10 min): headline sizes run first, each step checks --budget-s, and
both files are rewritten after every size, so a cut run still says what it measured and what not.
Without CUDA, --smoke runs tiny sizes under the Triton interpreter (perf_counter medians labelled
CPU) and writes the same schema: that is what CI checks.

This file holds the arguments, the budget and order of the plan, and writing both files (and the
run's record, through benchmarks.runner). The rest lives beside it in the package:
bench_cases.py (sizes, plan, rows, budget), bench_variants.py (building and timing each
variant), bench_goals.py (issue 5's goals and verdicts) and bench_markdown.py (the report).
"""

from __future__ import annotations

import time

T0 = time.perf_counter()  # imports and CUDA start-up count against the budget

import argparse  # noqa: E402
import datetime as dt  # noqa: E402
import json  # noqa: E402
import sys  # noqa: E402
from pathlib import Path  # noqa: E402

import torch  # noqa: E402

from autokernel.atomic import write_atomic  # noqa: E402
from benchmarks import runner  # noqa: E402

# bench_cases loads first (it also sorts first): without CUDA it sets TRITON_INTERPRET, which
# triton only honours if set before it is imported; so triton is not imported at the top here.
from benchmarks.bench_cases import (  # noqa: E402
    ON_GPU,
    OPS,
    OURS,
    ROOT,
    BudgetExceeded,
    Run,
    case_row,
    gpu_plan,
    smoke_plan,
)
from benchmarks.bench_markdown import render  # noqa: E402
from benchmarks.bench_variants import WRITE_RESERVE_S, copy_row, free_memory, run_case  # noqa: E402

MIN_CASE_S = 10.0  # GPU: a size needs at least this long (inputs, reference, three timings)


def execute(run: Run) -> None:
    """The machine's copy ceiling, then the plan in order. Both files are rewritten after every
    size, and a size the budget cannot take still gets a row, so a cut run says what it left."""
    run.rows.append(copy_row(run, None))
    write_outputs(run)
    for case in run.plan:
        if run.left() < (MIN_CASE_S if run.device.type == "cuda" else WRITE_RESERVE_S):
            note = f"skipped: budget ({max(0.0, run.left()):.0f} s left of {run.budget_s:.0f})"
            run.rows.append(case_row(case, (case.only or (OURS,))[0], note=note))
        else:
            try:
                run_case(run, case)
            except BudgetExceeded:
                note = "stopped: budget (inputs or reference)"
                run.rows.append(case_row(case, (case.only or (OURS,))[0], note=note))
            except Exception as exc:  # e.g. out of memory building the inputs
                note = f"failed before timing: {type(exc).__name__}: {exc}"[:300]
                run.rows.append(case_row(case, (case.only or (OURS,))[0], note=note, wrong=True))
        free_memory(compiled=run.with_compile)
        write_outputs(run)


def gpu_name(run: Run) -> str:
    return torch.cuda.get_device_name() if run.device.type == "cuda" else "cpu"


def write_outputs(run: Run) -> tuple[dict, str]:
    import triton  # loaded by now (bench_cases set TRITON_INTERPRET first): just its version

    data = {
        "gpu": gpu_name(run),
        "torch": torch.__version__,
        "triton": triton.__version__,
        "commit": run.commit,
        "date": dt.date.today().isoformat(),
        "rows": [r.to_json() for r in run.rows],
    }
    text = render(run, data)
    write_atomic(run.json_path, json.dumps(data, indent=1) + "\n")
    write_atomic(run.out, text)
    return data, text


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", type=Path, required=True, help="markdown report")
    ap.add_argument("--json", type=Path, default=None, help="rows as JSON (default: --out .json)")
    ap.add_argument("--kernels-dir", type=Path, default=ROOT / "kernels")
    ap.add_argument("--types", nargs="+", default=[",".join(OPS)], help="comma-separated types")
    ap.add_argument("--budget-s", type=float, default=540.0, help="wall seconds for everything")
    ap.add_argument("--smoke", action="store_true", help="tiny sizes; required without CUDA")
    ap.add_argument("--no-compile", action="store_true", help="leave torch.compile out")
    return runner.add_arguments(ap).parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    types = [t for arg in args.types for t in arg.split(",") if t]
    unknown = sorted(set(types) - set(OPS))
    if unknown:
        print(f"unknown types: {', '.join(unknown)}; known: {', '.join(OPS)}", file=sys.stderr)
        return 2
    if not ON_GPU and not args.smoke:
        print("no CUDA device: use --smoke for the CPU interpreter run", file=sys.stderr)
        return 2
    # torch.compile's max-autotune on the interpreter/CPU would only cost time and say nothing.
    with_compile = not (args.no_compile or args.smoke)
    plan = smoke_plan() if args.smoke else gpu_plan(with_compile)
    run = Run(
        out=args.out,
        json_path=args.json or args.out.with_suffix(".json"),
        commit=args.commit or runner.tree_commit(),
        kernels_dir=args.kernels_dir.resolve(),
        budget_s=args.budget_s,
        smoke=args.smoke,
        with_compile=with_compile,
        plan=[c for c in plan if c.op in types],
        t0=T0,
    )
    torch.set_grad_enabled(False)
    execute(run)
    data, text = write_outputs(run)
    runner.record("kernels_vs_baselines", data["rows"], text, commit=run.commit,
                  results=args.results)  # fmt: skip
    wrong = [r for r in run.rows if r.variant.startswith(OURS) and r.wrong]
    print(
        f"wrote {run.out} and {run.json_path}: {len(run.rows)} rows, {len(wrong)} of ours "
        f"wrong or failed, {time.perf_counter() - T0:.0f} s"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
