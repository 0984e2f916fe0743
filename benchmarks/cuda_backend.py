"""The CUDA C++ backend on the GPU, in one call of at most --budget-s seconds: every CUDA
starter built cold and loaded from the cache, judged by the five-stage harness (sandboxed, as
the loop judges it), then timed beside the Triton starter, eager PyTorch and the copy ceiling
(cuBLAS for matmul, at its benchmark sizes and 4095x4097x4096).

    python -m benchmarks.cuda_backend OUT_DIR --commit SHA [--budget-s 110] [--types a,b]

Writes OUT_DIR/h200-cuda-<date>.md and OUT_DIR/h200-cuda-latest.json after every step. Order
matters: the harness runs each starter in its own process before anything of it runs here, and
only starters it passed are timed in this process, since a kernel that faults leaves this
process's CUDA context unusable for every later figure. The harness runs several starters at
once without its own timings (this script times them), and the timings go goals first
(timing_plan): the CUDA starters against their ceilings at the benchmark sizes, then the Triton
and eager comparisons, then matmul's other sizes, so a budget that runs out cuts the least
needed figures. A failing step is recorded and the run goes on.
"""

from __future__ import annotations

import argparse
import concurrent.futures
import datetime as dt
import sys
import time
from dataclasses import replace as dc_replace
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

import torch  # noqa: E402
import triton  # noqa: E402

from autokernel import cuda_build  # noqa: E402
from autokernel.harness.guards import literal_assignment  # noqa: E402
from autokernel.harness.sandbox import Options, evaluate  # noqa: E402
from autokernel.harness.stages import to_float64  # noqa: E402
from autokernel.kernel_file import import_file  # noqa: E402
from autokernel.specs import dtype_name, get_spec  # noqa: E402
from autokernel.timing import measure  # noqa: E402
from benchmarks import runner  # noqa: E402
from benchmarks.cuda_backend_report import (  # noqa: E402
    CUDA,
    TRITON,
    Report,
    Row,
    guarded,
    verdict_summary,
    write,
)

TYPES = ("rmsnorm", "layernorm", "softmax", "cross_entropy", "reduce", "rotary_embedding",
         "matmul")  # fmt: skip
CUDA_DIR = ROOT / "kernels" / "cuda"
EXTRA_SIZES = {"matmul": ({"M": 4095, "N": 4097, "K": 4096},)}  # odd shape, timed vs cuBLAS
DTYPE = torch.bfloat16
COPY_NUMEL = 2**30  # bf16 elements: the machine's copy ceiling, as h200-latest.json measures it
COPY = "copy ceiling"
MATMUL_GOAL = {"M": 4096, "N": 4096, "K": 4096}
HARNESS_TIMEOUT_S = 90.0
HARNESS_WORKERS = 4  # sandboxed evaluations at once: each is a process of its own on the GPU
# Seconds a step is expected to take; a step starts only while that much budget is left.
HARNESS_STEP_S = 20.0
TIMING_STEP_S = 3.0


def _module(path: Path, name: str):
    return import_file(path, name)


def cold_builds(report: Report, kinds: list[str]) -> None:
    """Each starter's source built with an empty cache entry, all at once (nvcc is one process
    per build and the machine has cores to spare), then loaded again from the cache."""

    def build(kind: str) -> float:
        text = (CUDA_DIR / f"{kind}.py").read_text()
        source, config = literal_assignment(text, "CUDA_SOURCE"), literal_assignment(text, "CONFIG")
        cuda_build.cached_cubin(source, config).unlink(missing_ok=True)
        t0 = time.perf_counter()
        cuda_build.load(source, config)
        cold = time.perf_counter() - t0
        t0 = time.perf_counter()
        cuda_build.load(source, config)
        report.builds[kind] = {
            "cold_s": round(cold, 3),
            "cached_s": round(time.perf_counter() - t0, 3),
        }
        return cold

    if not kinds:
        return
    with concurrent.futures.ThreadPoolExecutor(max_workers=len(kinds)) as pool:
        futures = {kind: pool.submit(build, kind) for kind in kinds}
    for kind, future in futures.items():
        guarded(report, f"{kind} build", future.result)
    report.notes.append(f"cold builds ran {len(kinds)} at a time (one nvcc each)")


def judge_all(report: Report, kinds: list[str], deadline: float) -> None:
    """Each starter's five-stage verdict, HARNESS_WORKERS at a time. The harness's own timings
    are skipped (timing=False): they would run beside one another, and time_step measures every
    starter alone."""
    if time.monotonic() + HARNESS_STEP_S > deadline:
        report.notes += [f"{kind}: harness not run, out of budget" for kind in kinds]
        return
    opts = Options(timeout_s=HARNESS_TIMEOUT_S, compile_baseline=False, timing=False)
    with concurrent.futures.ThreadPoolExecutor(max_workers=HARNESS_WORKERS) as pool:
        futures = {kind: pool.submit(evaluate, CUDA_DIR / f"{kind}.py", opts) for kind in kinds}
    for kind, future in futures.items():
        guarded(report, f"{kind} harness",
                lambda kind=kind, future=future: report.verdicts.__setitem__(
                    kind, verdict_summary(future.result())))  # fmt: skip
    report.notes.append(f"harness: {HARNESS_WORKERS} starters at a time, without its timings")


def _rel_err(out: torch.Tensor, ref: torch.Tensor) -> float:
    scale = ref.abs().max().clamp_min(1e-30)
    return float((out.to(torch.float64) - ref).abs().max() / scale)


def _rate(spec, size, us: float) -> tuple[float, str]:
    if spec.bound == "memory":
        return spec.bytes_moved(size, DTYPE) / (us * 1e-6) / 1e9, "GBps"
    return spec.flops(size) / (us * 1e-6) / 1e12, "TFLOPS"


def timing_plan(kinds: list[str]) -> list[tuple[str, dict, tuple[str, ...]]]:
    """(type, size, variants) in the order they are timed: the figures issue 17's goals are
    judged by first (each CUDA starter at its benchmark sizes with its ceiling, matmul's odd
    shape for correctness), then the Triton and eager comparisons, then matmul's other sizes."""
    memory = [k for k in kinds if get_spec(k).bound == "memory"]
    steps: list[tuple[str, dict, tuple[str, ...]]] = []
    if "matmul" in kinds:
        steps += [("matmul", MATMUL_GOAL, (CUDA, "eager"))]
        steps += [("matmul", size, (CUDA, "eager")) for size in EXTRA_SIZES["matmul"]]
    steps += [(k, size, (CUDA, COPY)) for k in memory for size in get_spec(k).gpu.bench]
    steps += [(k, size, (TRITON, "eager")) for k in memory for size in get_spec(k).gpu.bench]
    if "matmul" in kinds:
        steps += [("matmul", MATMUL_GOAL, (TRITON,))]
        steps += [("matmul", size, (CUDA, "eager", TRITON))
                  for size in get_spec("matmul").gpu.bench if size != MATMUL_GOAL]  # fmt: skip
    return steps


class Variants:
    """Each variant's function for a type, loaded on first use: the CUDA starter only where the
    harness passed it, the Triton starter (whose first call may autotune) only when timed."""

    def __init__(self, report: Report) -> None:
        self.report = report
        self._modules: dict[str, object] = {}

    def fn(self, kind: str, variant: str):
        """(backend, function or None, note)."""
        if variant == CUDA:
            if self.report.verdicts.get(kind, {}).get("status") != "PASS":
                return "cuda", None, "not timed: the harness did not pass it"
            return "cuda", self._load(CUDA_DIR / f"{kind}.py", f"cuda_{kind}").kernel_fn, ""
        if variant == TRITON:
            return (
                "triton",
                self._load(ROOT / "kernels" / f"{kind}.py", f"triton_{kind}").kernel_fn,
                "",
            )
        note = "cuBLAS torch.matmul" if kind == "matmul" else "the spec's eager PyTorch"
        return "torch", get_spec(kind).eager, note

    def _load(self, path: Path, name: str):
        if name not in self._modules:
            self._modules[name] = _module(path, name)
        return self._modules[name]


def time_step(report: Report, kind: str, size: dict, variants: tuple[str, ...],
              fns: Variants, copies: dict[int, Row]) -> None:  # fmt: skip
    """The variants at one size, on the same inputs, each with its error against float64; the
    copy ceiling of the same bytes (measured once per byte count)."""
    spec = get_spec(kind)
    label = spec.label(size)
    gen = torch.Generator(device="cuda").manual_seed(0)
    inputs = spec.make_inputs(size, DTYPE, gen, torch.device("cuda"))
    ref = None
    for variant in variants:
        if variant == COPY:
            n = int(spec.bytes_moved(size, DTYPE) // 2 // DTYPE.itemsize)

            def copy_row(n=n) -> None:
                if n not in copies:
                    copies[n] = _copy(kind, label, n)
                report.rows.append(dc_replace(copies[n], op=kind, shape=label))

            guarded(report, f"{kind} {label} copy", copy_row)
            continue

        def row(variant=variant) -> None:
            nonlocal ref
            backend, fn, note = fns.fn(kind, variant)
            if fn is None:
                report.rows.append(Row(kind, label, dtype_name(DTYPE), variant, backend, None,
                                       None, _rate(spec, size, 1.0)[1], note=note))  # fmt: skip
                return
            if ref is None:
                ref = spec.reference(*to_float64(inputs))
            err = _rel_err(fn(*inputs), ref)
            us = measure(lambda: fn(*inputs), on_gpu=True).median_us
            rate, key = _rate(spec, size, us)
            report.rows.append(Row(kind, label, dtype_name(DTYPE), variant, backend, us, rate,
                                   key, err, note))  # fmt: skip

        guarded(report, f"{kind} {label} {variant}", row)


def _copy(op: str, shape: str, numel: int) -> Row:
    """A device copy moving the same bytes (read + write): the memory-bound ceiling."""
    src = torch.empty(numel, dtype=DTYPE, device="cuda")
    dst = torch.empty_like(src)
    us = measure(lambda: dst.copy_(src), on_gpu=True).median_us
    return Row(op, shape, dtype_name(DTYPE), COPY, "torch", us,
               2 * numel * DTYPE.itemsize / (us * 1e-6) / 1e9, "GBps",
               note="device copy (read + write) of the same bytes")  # fmt: skip


def time_all(report: Report, kinds: list[str], deadline: float, flush) -> None:
    fns, copies = Variants(report), {}
    for kind, size, variants in timing_plan(kinds):
        label = f"{kind} {get_spec(kind).label(size)}"
        if time.monotonic() + TIMING_STEP_S * len(variants) > deadline:
            report.notes.append(f"{label} {', '.join(variants)}: not timed, out of budget")
            continue
        time_step(report, kind, size, variants, fns, copies)
        torch.cuda.empty_cache()  # the size's inputs and float64 reference are gone by now
        flush()


def main() -> int:
    ap = runner.add_arguments(argparse.ArgumentParser(description=__doc__.splitlines()[0]))
    ap.add_argument("out_dir", type=Path)
    ap.add_argument("--budget-s", type=float, default=110.0)
    ap.add_argument("--types", default=",".join(TYPES))
    args = ap.parse_args()
    args.commit = args.commit or runner.tree_commit()
    start = time.monotonic()
    deadline = start + args.budget_s
    kinds = [k for k in args.types.split(",") if k]
    if not torch.cuda.is_available():
        print("error: no GPU: this script measures the CUDA backend on one", file=sys.stderr)
        return 2
    nvcc = guarded_version()
    report = Report(gpu=torch.cuda.get_device_name(), torch=torch.__version__,
                    triton=triton.__version__, nvcc=nvcc, commit=args.commit,
                    date=dt.date.today().isoformat(), command=" ".join(sys.argv))  # fmt: skip
    optin = getattr(torch.cuda.get_device_properties(0), "shared_memory_per_block_optin", None)
    report.notes.append(f"shared memory per block, opt-in: {optin} B (program.md says 227 KB)")
    memory_ops = {k for k in kinds if get_spec(k).bound == "memory"}
    flush = lambda: write(report, args.out_dir, memory_ops)
    guarded(
        report,
        "copy ceiling",
        lambda: report.rows.append(_copy("copy", str(COPY_NUMEL), COPY_NUMEL)),
    )
    cold_builds(report, kinds)
    flush()
    judge_all(report, kinds, deadline)
    flush()
    time_all(report, kinds, deadline, flush)
    report.notes.append(
        f"wall time {time.monotonic() - start:.0f} s of a {args.budget_s:g} s budget"
    )
    md, js = flush()
    runner.record("cuda_backend", report.to_json()["rows"], md.read_text(), commit=args.commit,
                  results=args.results)  # fmt: skip
    print(f"wrote {md} and {js}: {len(report.rows)} rows, {len(report.errors)} failed steps")
    return 0


def guarded_version() -> str:
    try:
        return cuda_build.nvcc_version(cuda_build.find_nvcc())
    except cuda_build.CudaBuildError as exc:
        return f"none ({exc})"


if __name__ == "__main__":
    sys.exit(main())
