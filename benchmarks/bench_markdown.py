"""The markdown report of benchmarks/kernels_vs_baselines.py: a header that says how the figures
were taken (command, versions, clock, budget), the goals with their verdicts, the copy ceiling
and one table per type.

Why the header is so explicit: the report is read away from the machine that made it, often
beside another day's report; figures only compare when the clock, the tolerances, what
torch.compile and Liger were and what the budget cut are written next to them.
"""

from __future__ import annotations

import time
from typing import Any

import torch

from autokernel.specs import SPECS
from autokernel.timing import REP_MS, WARMUP_MS, clock_name
from benchmarks import runner
from benchmarks.bench_cases import (
    COMPILE,
    COPY,
    EAGER,
    EAGER_NOTES,
    LIGER,
    ON_GPU,
    OPS,
    OURS,
    Row,
    Run,
)
from benchmarks.bench_goals import baseline, best_baseline, goal_lines, num_text, universe, us_text
from benchmarks.bench_variants import liger_available

VARIANT_ORDER = {EAGER: 1, COMPILE: 2, LIGER: 3, COPY: 4}


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def type_table(run: Run, rows: list[Row], op: str) -> list[str]:
    spec = SPECS[op]
    memory = spec.bound == "memory"
    order = {c.key: i for i, c in enumerate(universe(run))}
    mine = sorted(
        (r for r in rows if r.op == op),
        key=lambda r: (
            order.get((r.op, r.shape, r.dtype), len(order)),
            0 if r.variant.startswith(OURS) else VARIANT_ORDER.get(r.variant, 9),
        ),
    )
    unit, vs = ("GB/s", "% of copy") if memory else ("TFLOPS", "% of eager")
    lines = [
        f"## {op}",
        "",
        f"shape: {'×'.join(spec.dims)} (absent dims left out); eager: {EAGER_NOTES[op]}.",
        "",
        f"| shape | dtype | variant | µs | {unit} | {vs} | vs best baseline | rel err | note |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for r in mine:
        same = [x for x in rows if (x.op, x.shape, x.dtype) == (r.op, r.shape, r.dtype)]
        ref = baseline(same, COPY if memory else EAGER)
        ratio = ""
        if r.us is not None and ref is not None and ref.us is not None:
            ratio = f"{(ref.us / r.us):.0%}"
        best = best_baseline(same)
        speed = ""
        if r.variant.startswith(OURS) and r.us is not None and best is not None and best.us:
            speed = f"{best.us / r.us:.2f}× {best.variant}"
        err = "" if r.rel_err is None else f"{r.rel_err:.1e}"
        note = _cell(r.note)
        if r.wrong:
            note = "**WRONG**: " + note.removeprefix("WRONG: ")
        lines.append(
            f"| {r.shape} | {r.dtype} | {r.variant} | {us_text(r.us)} | "
            f"{num_text(r.rate)} | {ratio} | {speed} | {err} | {note} |"
        )
    return lines


def _liger_line() -> str:
    if not ON_GPU:
        return "Liger-Kernel: left out (needs CUDA)."
    if not liger_available():
        return (
            "Liger-Kernel: not installed on this machine (it is not on the lent H200): no "
            "Liger rows; 'best baseline' is the best of eager and torch.compile."
        )
    from importlib.metadata import PackageNotFoundError, version

    try:
        ver = version("liger-kernel")
    except PackageNotFoundError:
        ver = "version unknown"
    return (
        f"Liger-Kernel {ver}: rmsnorm, layernorm, softmax, cross_entropy (it has no reduce; "
        "its RoPE rotates q and k together, not the same work)."
    )


def render(run: Run, data: dict[str, Any]) -> str:
    on_gpu = run.device.type == "cuda"
    elapsed = time.perf_counter() - run.t0
    cut = [r for r in run.rows if r.note.startswith(("skipped: budget", "stopped: budget"))]
    files = sorted(p.name for p in run.kernels_dir.glob("*.py") if not p.name.startswith("_"))
    if run.with_compile:
        compiled = (
            'torch.compile: mode="max-autotune", dynamic=False, compile time excluded, inputs '
            "marked static (no CUDA-graph input copies); "
            "compute-bound types are compiled last, with what time is left (no goal "
            "names them)."
        )
    else:
        compiled = "torch.compile: left out (" + ("--smoke" if run.smoke else "--no-compile") + ")."
    clock = clock_name(on_gpu) + (f", warmup {WARMUP_MS} ms, rep {REP_MS} ms" if on_gpu else "")
    lines = [
        f"# Kernels vs baselines — {data['gpu']} ({data['date']})",
        "",
        f"- date: {data['date']}; GPU: {data['gpu']}; torch {data['torch']}; triton "
        f"{data['triton']}; CUDA {torch.version.cuda}",
        f"- commit: {data['commit']}",
        f"- command: `{runner.command()}`",
        f"- kernels: `{run.kernels_dir}` ({', '.join(files) or 'no files'})",
        f"- clock: {clock}",
        "- GB/s: the spec's bytes (each input read once, each output written once) / time; "
        "TFLOPS: the spec's FLOPs (causal attention counts half) / time.",
        "- rel err: max|out − ref| / max(1, max|ref|) against reference.py in float64 on the same "
        "inputs; **WRONG** above the dtype's tolerance (fp16 1e-2, bf16 2e-2, fp32 1e-4).",
        "- copy ceiling: a bf16 device-to-device copy of the same bytes (half read, half "
        "written); the copy table's first row is this machine's ceiling, the 90 % goal's base.",
        f"- {compiled}",
        f"- {_liger_line()}",
        f"- budget: {elapsed:.0f} s used of {run.budget_s:.0f} s; {len(cut)} rows skipped or "
        "stopped for the budget.",
        "",
    ]
    if not on_gpu:
        lines[2:2] = [
            "> CPU smoke run (Triton interpreter, perf_counter medians): not GPU figures.",
            "",
        ]
    lines += [*goal_lines(run, run.rows), ""]
    copies = [r for r in run.rows if r.op == "copy"]
    if copies:
        lines += [
            "## copy ceiling",
            "",
            "| elements | dtype | µs | GB/s | note |",
            "|---|---|---|---|---|",
        ]
        lines += [
            f"| {r.shape} | {r.dtype} | {us_text(r.us)} | {num_text(r.rate)} | {_cell(r.note)} |"
            for r in copies
        ]
        lines.append("")
    for op in OPS:
        if any(r.op == op for r in run.rows):
            lines += [*type_table(run, run.rows, op), ""]
    return "\n".join(lines)
