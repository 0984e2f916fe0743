"""What benchmarks/cuda_backend.py records, and how it is written: plain data and text only, so
it is tested on the CPU (tests/test_cuda_backend_bench.py).

A Report holds rows as benchmarks/results/h200-latest.json has them (op, shape, dtype, variant,
us, GBps or TFLOPS, rel_err, note) plus "backend", each CUDA starter's five-stage verdict and
build times, and every step that failed, so one broken starter never loses the others' figures.
"""

from __future__ import annotations

import json
import traceback
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from autokernel.atomic import write_atomic

MEMORY_GOAL = 0.85  # of the copy ceiling, memory-bound starters at the benchmark sizes
MATMUL_GOAL = 0.70  # of cuBLAS at 4096^3 bf16
CACHED_GOAL_S = 1.0
COLD_GOAL_S = 60.0
MATMUL_GOAL_SHAPE = "4096x4096x4096"
CUDA = "autokernel-cuda"
TRITON = "autokernel-triton"


@dataclass
class Row:
    op: str
    shape: str
    dtype: str
    variant: str  # autokernel-cuda, autokernel-triton, eager, copy ceiling
    backend: str  # cuda, triton, torch
    us: float | None
    rate: float | None
    rate_key: str  # "GBps" or "TFLOPS"
    rel_err: float | None = None
    note: str = ""

    def to_json(self) -> dict[str, Any]:
        out = {"op": self.op, "shape": self.shape, "dtype": self.dtype, "variant": self.variant,
               "backend": self.backend, "us": _round(self.us), self.rate_key: _round(self.rate),
               "rel_err": self.rel_err}  # fmt: skip
        if self.note:
            out["note"] = self.note
        return out


@dataclass
class Report:
    gpu: str
    torch: str
    triton: str
    nvcc: str
    commit: str
    date: str
    command: str
    rows: list[Row] = field(default_factory=list)
    builds: dict[str, dict[str, Any]] = field(default_factory=dict)  # type -> cold_s, cached_s
    verdicts: dict[str, dict[str, Any]] = field(default_factory=dict)  # type -> summary
    errors: list[str] = field(default_factory=list)  # "step: what went wrong"
    notes: list[str] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        data = asdict(self)
        data["rows"] = [r.to_json() for r in self.rows]
        return data


def guarded(report: Report, step: str, fn: Callable[[], object]) -> object | None:
    """Run one step; on any exception record it (step, type, message, last frame) and go on."""
    try:
        return fn()
    except Exception as exc:  # a broken starter or a refused launch: recorded, never fatal
        frame = traceback.extract_tb(exc.__traceback__)[-1] if exc.__traceback__ else None
        where = f" ({Path(frame.filename).name}:{frame.lineno})" if frame else ""
        text = " ".join(f"{type(exc).__name__}: {exc}".split())[:600]
        report.errors.append(f"{step}: {text}{where}")
        return None


def verdict_summary(verdict: Any) -> dict[str, Any]:
    """The parts of a harness Verdict a reader of the record needs."""
    return {
        "status": verdict.status.value,
        "message": verdict.message,
        "stages": [
            {"name": s.name, "status": s.status, "checks": s.checks, "seconds": round(s.seconds, 2)}
            for s in verdict.stages
        ],
        "harness_s": round(verdict.harness_s, 2),
        "build_s": verdict.build_s,
        "builds": verdict.builds,
        "sandbox": verdict.sandbox,
        "timings": [
            {
                "size": t.size,
                "dtype": t.dtype,
                "us": t.us,
                "throughput": t.throughput,
                "unit": t.unit,
                "pct_peak": t.pct_peak,
                "speedup_vs_eager": t.speedup_vs_eager,
            }
            for t in verdict.timings
        ],
    }


def _round(x: float | None) -> float | None:
    return None if x is None else float(f"{x:.5g}")


def _find(rows: list[Row], op: str, shape: str, variant: str) -> Row | None:
    return next((r for r in rows if (r.op, r.shape, r.variant) == (op, shape, variant)), None)


def goals(report: Report, memory_ops: set[str]) -> list[str]:
    """Issue 17's goals, each met / not met / no figure, with the figures that decide it."""
    lines = []
    for r in report.rows:
        if r.variant != CUDA or r.us is None:
            continue
        if r.op in memory_ops:
            copy = _find(report.rows, r.op, r.shape, "copy ceiling")
            if copy and copy.us:
                frac = copy.us / r.us
                verdict = "met" if frac >= MEMORY_GOAL else "not met"
                lines.append(f"{r.op} {r.shape}: {frac:.0%} of the copy ceiling "
                             f"(goal {MEMORY_GOAL:.0%}): {verdict}")  # fmt: skip
        elif r.op == "matmul" and r.shape == MATMUL_GOAL_SHAPE:
            cublas = _find(report.rows, r.op, r.shape, "eager")
            if cublas and cublas.us:
                frac = cublas.us / r.us
                verdict = "met" if frac >= MATMUL_GOAL else "not met"
                lines.append(f"matmul {r.shape} bf16: {frac:.0%} of cuBLAS "
                             f"(goal {MATMUL_GOAL:.0%}): {verdict}")  # fmt: skip
    for kind, b in sorted(report.builds.items()):
        for key, goal, what in (("cold_s", COLD_GOAL_S, "cold build"),
                                ("cached_s", CACHED_GOAL_S, "cached load")):  # fmt: skip
            s = b.get(key)
            if s is None:
                lines.append(f"{kind} {what}: no figure")
            else:
                lines.append(f"{kind} {what}: {s:.2f} s (goal <= {goal:g} s): "
                             + ("met" if s <= goal else "not met"))  # fmt: skip
    return lines


def markdown(report: Report, memory_ops: set[str]) -> str:
    out = [
        f"# CUDA C++ backend on {report.gpu}, {report.date}",
        "",
        f"torch {report.torch}, Triton {report.triton}, nvcc {report.nvcc}, commit "
        f"{report.commit}. Command: `{report.command}`.",
        "",
        "Timings: `autokernel.timing.measure` (do_bench median, L2 flushed), bf16, on one",
        "set of random inputs per size; rel_err = max |out - ref| / max |ref| against float64.",
        "",
        "## Builds (nvcc, -cubin -arch for this GPU)",
        "",
        "| type | cold build s | cached load s |",
        "|---|---|---|",
    ]
    for kind, b in sorted(report.builds.items()):
        out.append(f"| {kind} | {_cell(b.get('cold_s'))} | {_cell(b.get('cached_s'))} |")
    out += ["", "## Five-stage verdicts (harness, sandboxed worker, no torch.compile baseline)", "",
            "| type | status | stages | harness s | message |", "|---|---|---|---|---|"]  # fmt: skip
    for kind, v in sorted(report.verdicts.items()):
        stages = " ".join(f"{s['name']}:{s['status']}" for s in v["stages"])
        message = v["message"].replace("|", "/")[:160]
        out.append(f"| {kind} | {v['status']} | {stages} | {v['harness_s']} | {message} |")
    out += ["", "## Timings", "", "| op | shape | variant | backend | µs | rate | rel_err | note |",
            "|---|---|---|---|---|---|---|---|"]  # fmt: skip
    for r in report.rows:
        rate = "" if r.rate is None else f"{r.rate:.4g} {r.rate_key}"
        err = "" if r.rel_err is None else f"{r.rel_err:.2e}"
        out.append(f"| {r.op} | {r.shape} | {r.variant} | {r.backend} | {_cell(r.us)} | {rate} | "
                   f"{err} | {r.note} |")  # fmt: skip
    out += ["", "## Goals (issue 17)", "", *[f"- {g}" for g in goals(report, memory_ops)]]
    if report.notes:
        out += ["", "## Notes", "", *[f"- {n}" for n in report.notes]]
    if report.errors:
        out += ["", "## Steps that failed (recorded, the rest went on)", "",
                *[f"- {e}" for e in report.errors]]  # fmt: skip
    return "\n".join(out) + "\n"


def _cell(x: float | None) -> str:
    return "" if x is None else f"{x:.4g}"


def write(report: Report, out_dir: Path, memory_ops: set[str]) -> tuple[Path, Path]:
    """h200-cuda-<date>.md and h200-cuda-latest.json in out_dir, each replaced atomically (the
    script writes after every step, so a cut run keeps what it measured)."""
    out_dir.mkdir(parents=True, exist_ok=True)
    md = out_dir / f"h200-cuda-{report.date}.md"
    js = out_dir / "h200-cuda-latest.json"
    write_atomic(md, markdown(report, memory_ops))
    write_atomic(js, json.dumps(report.to_json(), indent=1, default=str) + "\n")
    return md, js
