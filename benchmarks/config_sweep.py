"""Time many CONFIGs of one kernel file at one size, in one process: where is the roofline
reachable, and which knob gets there?

    python -m benchmarks.config_sweep --jobs sweep.json --out benchmarks/results/x.json [--commit SHA]

sweep.json is a list of jobs: {"type": "softmax", "size": {"rows": 4096, "cols": 50257},
"dtype": "float16", "grid": {"VARIANT": ["online"], "num_warps": [8, 16]}, "file": optional
path (default kernels/<type>.py)}. Every combination of the grid's values is set over the
file's own CONFIG, run once against the float64 reference (rel err as in
kernels_vs_baselines.py) and timed with the harness clock (do_bench median, L2 flushed).

Why this exists beside the tuner: the tuner walks one knob at a time through the full harness
(about 10 s per experiment); this answers "how fast can this code go at this size" in a
second per config, which is what choosing a starter's default and its SEARCH_SPACE needs. It
does not replace the five stages: a config picked here still has to pass the harness.
"""

from __future__ import annotations

import argparse
import copy
import itertools
import json
import sys
import time
from dataclasses import asdict
from pathlib import Path

import torch

from autokernel.harness.compiled import device_limits, forget, kernel_facts
from autokernel.specs import SPECS, dtype_name, parse_dtype
from autokernel.timing import measure
from benchmarks import runner

# bench_cases first: it sets TRITON_INTERPRET without CUDA before triton is imported.
from benchmarks.bench_cases import ON_GPU, ROOT
from benchmarks.bench_variants import SEED, free_memory, load_module, reference, rel_err


def _combos(grid: dict[str, list]) -> list[dict]:
    keys = list(grid)
    return [dict(zip(keys, vals, strict=True)) for vals in itertools.product(*grid.values())]


def run_job(job: dict, device: torch.device, deadline_at: float) -> list[dict]:
    spec = SPECS[job["type"]]
    dtype = parse_dtype(job.get("dtype", "bfloat16"))
    size = job["size"]
    path = Path(job.get("file") or ROOT / "kernels" / f"{job['type']}.py")
    module = load_module(path, f"_sweep_{path.stem}")
    base = copy.deepcopy(module.CONFIG)
    gen = torch.Generator(device=device).manual_seed(SEED)
    args = spec.make_inputs(size, dtype, gen, device)
    ref = reference(spec, args)
    tol = spec.tolerance(dtype)[0]
    limits = device_limits() if ON_GPU else {}
    rows = []
    for cfg in _combos(job["grid"]):
        if time.monotonic() > deadline_at:
            rows.append({"config": cfg, "note": "skipped: budget"})
            continue
        module.CONFIG = {**base, **cfg}
        row: dict = {"config": cfg}
        forget(module)  # what this config compiles or reloads is what it uses
        try:
            t0 = time.perf_counter()
            out = module.kernel_fn(*args)
            err, problem = rel_err(out, ref)
            del out
            row["first_call_s"] = round(time.perf_counter() - t0, 2)
            m = measure(lambda: module.kernel_fn(*args), device.type == "cuda")
            row["us"] = round(m.median_us, 2)
            rate = (
                spec.bytes_moved(size, dtype) / m.median_us / 1e3
                if spec.bound == "memory"
                else spec.flops(size) / m.median_us / 1e6
            )
            row["GBps" if spec.bound == "memory" else "TFLOPS"] = round(rate, 1)
            row["rel_err"] = err
            facts = kernel_facts(module, limits) if ON_GPU else None
            if facts:  # registers, spills, resident warps, 16-byte loads per compiled kernel
                row["kernels"] = [asdict(f) for f in facts]
            if err is None or err > tol:
                row["note"] = f"WRONG: {problem or f'rel err {err:.1e}'}"
        except Exception as exc:  # out of resources, compile errors: a row, not a crash
            row["note"] = f"failed: {type(exc).__name__}: {exc}"[:200]
        rows.append(row)
        print(job["type"], spec.label(size), row, flush=True)
    module.CONFIG = base
    free_memory(compiled=False)
    return rows


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--jobs", type=Path, required=True)
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--budget-s", type=float, default=500.0)
    args = runner.add_arguments(ap).parse_args(argv)
    args.commit = args.commit or runner.tree_commit()
    jobs = json.loads(args.jobs.read_text())
    device = torch.device("cuda" if ON_GPU else "cpu")
    deadline_at = time.monotonic() + args.budget_s
    torch.set_grad_enabled(False)
    import triton

    results = []
    for job in jobs:
        rows = run_job(job, device, deadline_at)
        ok = [r for r in rows if "us" in r and "note" not in r]
        best = min(ok, key=lambda r: r["us"]) if ok else None
        results.append(
            {
                "type": job["type"],
                "shape": SPECS[job["type"]].label(job["size"]),
                "dtype": dtype_name(parse_dtype(job.get("dtype", "bfloat16"))),
                "best": best,
                "rows": rows,
            }
        )
        data = {
            "gpu": torch.cuda.get_device_name() if ON_GPU else "cpu (interpreter)",
            "torch": torch.__version__,
            "triton": triton.__version__,
            "commit": args.commit,
            "command": " ".join(sys.argv),
            "jobs": results,
        }
        args.out.write_text(json.dumps(data, indent=1) + "\n")
    summary = [{k: r[k] for k in ("type", "shape", "dtype", "best")} for r in results]
    runner.record("config_sweep", summary, runner.table(summary), commit=args.commit,
                  results=args.results, extra={"jobs": results})  # fmt: skip
    for r in results:
        print(r["type"], r["shape"], r["dtype"], "best:", r["best"])
    return 0


if __name__ == "__main__":
    sys.exit(main())
