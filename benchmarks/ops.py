"""Generic targets on the GPU: Inductor's own Triton as the starter, against eager and compile.

For each of the 30 ops of ops_cases.py, at LLM-scale sizes in bf16, one device call:
- traces the op into a region (autokernel.model.capture) and writes its starter from the code
  torch.compile generates for it (autokernel.model.generic_starter), which must pass the static
  guard; a trace or starter that fails is a row with the reason;
- checks the starter against the float64 replay of the region (rel_err: max |got - exact| over
  the output's scale);
- times eager, torch.compile (default mode, dynamic=False) and the starter with the one timing
  path (do_bench median, L2 flushed), and with --tune-s a short walk of the starter's
  SEARCH_SPACE (one key at a time, nearest values first, in this process: a sweep of trusted
  generated code, not the sandboxed night);
- writes benchmarks/results/<prefix>-<date>.md and <prefix>-latest.json (rows as in
  h200-latest.json: op, shape, dtype, variant, us, GBps, rel_err, note) after every op, so a run
  cut by --budget-s keeps what it measured, and at the end records the run through
  benchmarks/runner.py (question "ops": a line of <gpu>.jsonl, latest.md regenerated).

    python -m benchmarks.ops --commit SHA --budget-s 150 --shard 1/2            # H200, 150 s
    python -m benchmarks.ops --commit SHA --budget-s 150 --shard 2/2 --merge    # the rest
    python -m benchmarks.ops --smoke --out-dir /tmp/ops --results /tmp/ops --cases gelu_tanh   # CPU
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import sys
import tempfile
import time
from pathlib import Path

import torch

ON_GPU = torch.cuda.is_available()
if not ON_GPU:
    os.environ["TRITON_INTERPRET"] = "1"  # before triton or any kernel file is imported
ROOT = Path(__file__).resolve().parents[1]
from autokernel.agents.tuner import read_config  # noqa: E402
from autokernel.harness.static_check import check_source  # noqa: E402
from autokernel.kernel_file import import_file  # noqa: E402
from autokernel.model.capture import capture  # noqa: E402
from autokernel.model.generic_starter import starter_for  # noqa: E402
from autokernel.specs.region import Region  # noqa: E402
from autokernel.timing import measure  # noqa: E402
from benchmarks import runner  # noqa: E402
from benchmarks.ops_cases import CASES, OpCase, small  # noqa: E402

EAGER, COMPILE, STARTER, TUNED = "eager", "torch.compile", "starter", "tuned"
PER_OP_S = 8.0  # an op is begun only with this much budget left (trace, codegen, 3 compiles)


def _inputs(case: OpCase, dtype: torch.dtype, device: torch.device, smoke: bool) -> list:
    gen = torch.Generator(device=device).manual_seed(0)
    out = []
    for k, shape in enumerate(case.shapes):
        shape = small(shape) if smoke else shape
        x = torch.randn(shape, generator=gen, device=device, dtype=torch.float32)
        out.append((x.abs() if k in case.positive else x).to(dtype))
    return out


def _bytes(tensors: list, out: object) -> int:
    outs = out if isinstance(out, tuple) else (out,)
    return sum(t.numel() * t.element_size() for t in (*tensors, *outs))


def _flat(out: object) -> torch.Tensor:
    outs = out if isinstance(out, tuple) else (out,)
    return outs[0] if len(outs) == 1 else torch.cat([o.reshape(-1) for o in outs])


def _rel_err(got: torch.Tensor, exact: torch.Tensor) -> float:
    scale = max(1.0, float(exact.abs().max()))
    return float((got.double() - exact).abs().max()) / scale


def _load(source: str, folder: Path, name: str):
    path = folder / f"{name}.py"
    path.write_text(source)
    return import_file(path, f"ops_starter_{name}")


def _tune(module, xs: list, budget_s: float) -> tuple[float, dict]:
    """Best median over single-key moves from CONFIG, nearest values first, within budget_s."""
    config, space = read_config(Path(module.__file__).read_text())
    best_us = measure(lambda: module.kernel_fn(*xs), ON_GPU).median_us
    best = dict(config)
    deadline = time.monotonic() + budget_s
    for key, values in space.items():
        here = values.index(best[key]) if best[key] in values else 0
        for value in sorted(values, key=lambda v: abs(values.index(v) - here)):
            if time.monotonic() > deadline:
                return best_us, best
            if value == best[key]:
                continue
            module.CONFIG.update({**best, key: value})
            try:
                us = measure(lambda: module.kernel_fn(*xs), ON_GPU).median_us
            except Exception:  # a config this GPU cannot run: not a candidate
                continue
            if us < best_us:
                best_us, best = us, {**best, key: value}
    module.CONFIG.update(best)
    return best_us, best


def run_case(case: OpCase, args, folder: Path, phase: str = "all") -> list[dict]:
    """The op's rows: "baselines" (eager, torch.compile), "starter" (starter, tuned) or all.
    main() times every op's baselines before it writes any starter: generating a starter runs
    Inductor (at the model's shape on a GPU, with its autotuner), and in the H200 run that
    did so op by op, seven reductions' compile baselines measured 1.2-3x slower than in the
    run before, which had not (benchmarks/results/h200-2026-12-04-bf290d9.md)."""
    device = torch.device("cuda" if ON_GPU else "cpu")
    dtype = torch.bfloat16 if ON_GPU else torch.float32
    xs = _inputs(case, dtype, device, args.smoke)
    shape = " ".join("x".join(map(str, x.shape)) for x in xs)
    row = {"op": case.name, "shape": shape, "dtype": str(dtype).removeprefix("torch."),
           "what": case.what}  # fmt: skip
    rows = []

    def add(variant: str, us: float | None, nbytes: int, rel_err=None, note="") -> None:
        gbps = nbytes / us / 1e3 if us else None
        rows.append({**row, "variant": variant, "us": round(us, 2) if us else None,
                     "GBps": round(gbps, 1) if gbps else None, "rel_err": rel_err, "note": note})  # fmt: skip

    with torch.no_grad():
        want = case.fn(*xs)
        nbytes = _bytes(xs, want)
        if phase != "starter":
            add(EAGER, measure(lambda: case.fn(*xs), ON_GPU).median_us, nbytes)
        if not args.no_compile and phase != "starter":
            try:
                compiled = torch.compile(case.fn, dynamic=False)
                compiled(*xs)
                add(COMPILE, measure(lambda: compiled(*xs), ON_GPU).median_us, nbytes)
            except Exception as exc:  # a compile that fails is a row with its reason
                add(COMPILE, None, nbytes, note=f"{type(exc).__name__}: {exc}"[:200])
        if phase == "baselines":
            return rows
        try:
            region = capture(case.fn, xs, case.name)
            source = starter_for(region.to_dict(), device)
        except Exception as exc:  # no region or no starter: the reason is the finding
            add(STARTER, None, nbytes, note=f"{type(exc).__name__}: {exc}"[:300])
            return rows
        findings = check_source(source)
        module = _load(source, folder, case.name)
        exact = Region.from_dict(region.to_dict()).replay(
            [x.double() for x in xs], upcast=True
        )  # fmt: skip
        err = _rel_err(module.kernel_fn(*xs), exact)
        note = "guard: " + "; ".join(map(str, findings[:3])) if findings else ""
        add(STARTER, measure(lambda: module.kernel_fn(*xs), ON_GPU).median_us, nbytes,
            round(err, 6), note)  # fmt: skip
        if args.tune_s > 0:
            us, config = _tune(module, xs, args.tune_s)
            err = _rel_err(module.kernel_fn(*xs), exact)
            add(TUNED, us, nbytes, round(err, 6), json.dumps(config))
    _ = _flat(want)
    return rows


def markdown(meta: dict, rows: list[dict]) -> str:
    lines = [
        f"# Generic targets: Inductor's starter vs eager and torch.compile ({meta['date']})",
        "",
        f"GPU {meta['gpu']}, torch {meta['torch']}, Triton {meta['triton']}, commit "
        f"{meta['commit'] or '?'}. Command: `{meta['command']}`. Times: do_bench median, L2 "
        "flushed (CPU runs: perf_counter, interpreter: not GPU figures). rel_err: max |starter "
        "- float64 replay| over max(1, |exact|).",
        "",
        "| op | shape | variant | us | GB/s | vs eager | vs compile | rel_err | note |",
        "|---|---|---|---:|---:|---:|---:|---:|---|",
    ]
    by_op: dict[str, dict[str, dict]] = {}
    for r in rows:
        by_op.setdefault(r["op"], {})[r["variant"]] = r
    for op, variants in by_op.items():
        eager, comp = variants.get(EAGER, {}).get("us"), variants.get(COMPILE, {}).get("us")
        for name, r in variants.items():
            us = r["us"]
            vs_e = f"{eager / us:.2f}x" if us and eager else ""
            vs_c = f"{comp / us:.2f}x" if us and comp else ""
            lines.append(
                f"| {op} | {r['shape']} | {name} | {us or '-'} | {r['GBps'] or '-'} | {vs_e} | "
                f"{vs_c} | {r['rel_err'] if r['rel_err'] is not None else ''} | "
                f"{str(r['note'])[:120]} |"
            )
    return "\n".join([*lines, "", *goals(by_op)]) + "\n"


def goals(by_op: dict[str, dict[str, dict]]) -> list[str]:
    """Issue 15's two goals, counted over the ops with a timed tuned (else starter) kernel."""
    faster: dict[str, list[str]] = {EAGER: [], COMPILE: []}
    timed: dict[str, list[str]] = {EAGER: [], COMPILE: []}
    for op, variants in by_op.items():
        ours = (variants.get(TUNED) or variants.get(STARTER) or {}).get("us")
        for base in (EAGER, COMPILE):
            theirs = variants.get(base, {}).get("us")
            if ours and theirs:
                timed[base].append(op)
                if ours <= theirs:
                    faster[base].append(op)

    def line(base: str, goal: str) -> str:
        n, of = len(faster[base]), len(timed[base])
        below = sorted(set(timed[base]) - set(faster[base]))
        return (f"- ours ≥ {base}: {n} of {of} ops (goal: {goal})"
                + (f"; below: {', '.join(below)}" if below else ""))  # fmt: skip

    return ["## Goals (issue 15)", "", line(EAGER, "all"), line(COMPILE, "≥ 80 %")]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--budget-s", type=float, default=150.0, help="stop starting ops after this")
    ap.add_argument("--tune-s", type=float, default=0.0, help="per-op CONFIG walk (seconds)")
    ap.add_argument("--cases", default="", help="comma-separated op names (default: all 30)")
    ap.add_argument("--shard", default="1/1", help="K/N: the K-th of N equal parts of the cases")
    ap.add_argument("--merge", action="store_true",
                    help="keep the rows of other ops already in <prefix>-latest.json")  # fmt: skip
    ap.add_argument("--smoke", action="store_true", help="CPU-sized shapes")
    ap.add_argument("--no-compile", action="store_true", help="skip the torch.compile variant")
    ap.add_argument("--prefix", default="h200-ops")
    ap.add_argument("--out-dir", type=Path, default=ROOT / "benchmarks" / "results")
    args = runner.add_arguments(ap).parse_args(argv)
    args.commit = args.commit or runner.tree_commit()
    k, n = (int(v) for v in args.shard.split("/"))
    chosen = [c for c in CASES if not args.cases or c.name in args.cases.split(",")]
    chosen = chosen[(k - 1) * len(chosen) // n : k * len(chosen) // n]
    start = time.monotonic()
    date = datetime.date.today().isoformat()
    import triton

    meta = {"gpu": torch.cuda.get_device_name() if ON_GPU else "cpu", "torch": torch.__version__,
            "triton": triton.__version__, "commit": args.commit, "date": date,
            "command": "python -m benchmarks.ops " + " ".join(argv or sys.argv[1:])}  # fmt: skip
    args.out_dir.mkdir(parents=True, exist_ok=True)
    rows: list[dict] = _kept(args, {c.name for c in chosen}) if args.merge else []
    skipped = []
    with tempfile.TemporaryDirectory() as tmp:
        for phase in ("baselines", "starter"):
            for case in chosen:
                if case.name in skipped:
                    continue
                if phase == "starter" and time.monotonic() - start > args.budget_s - PER_OP_S:
                    skipped.append(case.name)
                    continue
                t0 = time.monotonic()
                try:
                    rows += run_case(case, args, Path(tmp), phase)
                except Exception as exc:  # one op failing must not lose the others' figures
                    rows.append({"op": case.name, "shape": "", "dtype": "", "variant": STARTER,
                                 "us": None, "GBps": None, "rel_err": None,
                                 "note": f"{type(exc).__name__}: {exc}"[:300]})  # fmt: skip
                print(f"{case.name} {phase}: {time.monotonic() - t0:.1f} s", flush=True)
                _write(args, meta | {"skipped": skipped}, _ordered(rows))
    rows = _ordered(rows)
    seconds = round(time.monotonic() - start, 1)
    _write(args, meta | {"skipped": skipped, "seconds": seconds}, rows)
    # With --merge the rows are every shard's so far: the last shard's line is the whole report.
    runner.record("ops", rows, markdown(meta, rows), commit=args.commit, results=args.results,
                  extra={"skipped": skipped, "seconds": seconds, "prefix": args.prefix})  # fmt: skip
    print(markdown(meta, rows))
    return 0


def _ordered(rows: list[dict]) -> list[dict]:
    """Each op's rows together, ops in first-seen order (the two phases interleave them)."""
    order = {op: i for i, op in enumerate(dict.fromkeys(r["op"] for r in rows))}
    return sorted(rows, key=lambda r: order[r["op"]])  # stable: variants keep their order


def _kept(args, rerun: set[str]) -> list[dict]:
    """The rows of ops this call does not run, from the last call's JSON (one report from
    several shards)."""
    path = args.out_dir / f"{args.prefix}-latest.json"
    try:
        old = json.loads(path.read_text()).get("rows", [])
    except (OSError, ValueError):
        return []
    return [r for r in old if r.get("op") not in rerun]


def _write(args, meta: dict, rows: list[dict]) -> None:
    (args.out_dir / f"{args.prefix}-latest.json").write_text(
        json.dumps({**meta, "rows": rows}, indent=1) + "\n"
    )
    (args.out_dir / f"{args.prefix}-{meta['date']}.md").write_text(markdown(meta, rows))


if __name__ == "__main__":
    sys.exit(main())
