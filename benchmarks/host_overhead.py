"""Host time per kernel call, for every type at its smallest benchmark size (issue 13's goal:
at most 12 us, median): the starter's kernel_fn called directly, the same kernel through its
torch.library op (what a patched model calls), and the comparable PyTorch op (the spec's eager
baseline).

Host time of a call = the wall time Python spends inside it, perf_counter on either side, with no
synchronisation in between: a call only queues work. Each round makes CALLS back-to-back calls
after a synchronisation, few enough that the launch queue (about a thousand entries) never
fills, so no call waits for the GPU; the median runs over every call of every round. Without
CUDA the kernels run in Triton's interpreter at the CPU sizes, and the figures (labelled CPU)
are the interpreter's execution time, good for checking that the script works, not for the goal.
--stub-launches replaces every Triton kernel of the starters by a launch that does nothing, so the
figures are kernel_fn's own Python (planning, allocation, argument handling) and the op's
routing: the part of the host path this repository controls, measurable on a CPU.

    python -m benchmarks.host_overhead [--types rmsnorm softmax] [--json rows.json] [--out t.md]
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import statistics
import time
from collections.abc import Callable
from pathlib import Path

import torch

ON_GPU = torch.cuda.is_available()
if not ON_GPU:
    os.environ["TRITON_INTERPRET"] = "1"  # before triton or any kernel file is imported

ROOT = Path(__file__).resolve().parents[1]

import triton  # noqa: E402

from autokernel.model import kernel_ops  # noqa: E402
from autokernel.specs import SPECS, KernelSpec, Size  # noqa: E402
from benchmarks import runner  # noqa: E402

DIRECT, OP, TORCH = "autokernel host", "autokernel op host", "torch host"
GOAL_US = 12.0  # issue 13: median host time per call at the smallest benchmark size


def smallest_size(spec: KernelSpec, on_gpu: bool) -> Size:
    """The benchmark size with the least work: bytes for memory-bound types, flops else."""
    dtype = spec.bench_dtype_gpu if on_gpu else spec.bench_dtype_cpu
    if spec.bound == "memory":
        return min(spec.sizes(on_gpu).bench, key=lambda s: spec.bytes_moved(s, dtype))
    return min(spec.sizes(on_gpu).bench, key=spec.flops)


def host_us(fn: Callable[[], object], calls: int, rounds: int) -> float:
    """Median wall time of one call, over `rounds` bursts of `calls` unsynchronised calls."""
    times: list[float] = []
    for _ in range(rounds):
        if ON_GPU:
            torch.cuda.synchronize()
        for _ in range(calls):
            start = time.perf_counter()
            fn()
            times.append(time.perf_counter() - start)
    if ON_GPU:
        torch.cuda.synchronize()
    return statistics.median(times) * 1e6


class _NoLaunch:
    """Stands in for a @triton.jit kernel under --stub-launches: kernel[grid](...) does nothing."""

    def __getitem__(self, grid: object) -> Callable[..., None]:
        return lambda *args, **options: None


def measure_type(kind: str, calls: int, rounds: int, stub: bool = False) -> list[dict]:
    """The three variants of one type, each warmed up first (compilation is not host time)."""
    spec = SPECS[kind]
    size = smallest_size(spec, ON_GPU)
    device = torch.device("cuda" if ON_GPU else "cpu")
    dtype = spec.bench_dtype_gpu if ON_GPU else spec.bench_dtype_cpu
    gen = torch.Generator(device=device).manual_seed(0)
    args = spec.make_inputs(size, dtype, gen, device)
    kernel = kernel_ops.load_kernel(ROOT / "kernels" / f"{kind}.py")
    if stub:
        namespace = kernel.fn.__globals__  # the kernel module's, loaded by path
        for name, value in list(namespace.items()):
            if isinstance(value, triton.runtime.jit.KernelInterface):
                namespace[name] = _NoLaunch()
    router = kernel_ops.Router(kind, [kernel])
    slot = kernel_ops.register(router)
    op = kernel_ops.OPS[kind]
    variants: dict[str, Callable[[], object]] = {
        DIRECT: lambda: kernel.fn(*args),
        OP: lambda: op(*args, slot),
        TORCH: lambda: spec.eager(*args),
    }
    rows = []
    try:
        with torch.no_grad():
            for variant, fn in variants.items():
                for _ in range(3):
                    fn()
                us = host_us(fn, calls, rounds)
                rows.append(
                    {"type": kind, "size": spec.label(size), "variant": variant, "host_us": us}
                )
    finally:
        kernel_ops.unregister(slot)
    if router.fallbacks:
        raise RuntimeError(f"{kind}: the op fell back to PyTorch: {dict(router.fallbacks)}")
    return rows


def markdown(data: dict) -> str:
    where = data["gpu"] if ON_GPU else "CPU, Triton interpreter (not the goal's figure)"
    if data["stub_launches"]:
        where += "; launches stubbed out: kernel_fn's own Python only"
    lines = [
        f"# Host time per call ({where})",
        "",
        f"- torch {data['torch']}, triton {data['triton']}, commit {data['commit']}, "
        f"{data['date']}",
        f"- median of {data['calls']} unsynchronised calls x {data['rounds']} rounds; "
        f"goal: autokernel host <= {GOAL_US:g} us",
        "",
        f"| type | size | {DIRECT} | {OP} | {TORCH} |",
        "| --- | --- | ---: | ---: | ---: |",
    ]
    by_type: dict[str, dict] = {}
    for row in data["rows"]:
        by_type.setdefault(row["type"], {"size": row["size"]})[row["variant"]] = row["host_us"]
    for kind, cells in by_type.items():
        us = [f"{cells[v]:.1f}" if v in cells else "-" for v in (DIRECT, OP, TORCH)]
        lines.append(f"| {kind} | {cells['size']} | " + " | ".join(us) + " |")
    return "\n".join(lines) + "\n"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--types", nargs="+", default=list(SPECS), choices=list(SPECS))
    # 100 calls of up to 6 launches each stay well inside the ~1024-entry launch queue.
    ap.add_argument("--calls", type=int, default=100 if ON_GPU else 3)
    ap.add_argument("--rounds", type=int, default=20 if ON_GPU else 2)
    ap.add_argument("--json", type=Path, help="write the rows here as JSON")
    ap.add_argument("--out", type=Path, help="write the markdown table here")
    ap.add_argument(
        "--stub-launches", action="store_true", help="time kernel_fn without its launches"
    )
    args = runner.add_arguments(ap).parse_args()
    args.commit = args.commit or runner.tree_commit()
    rows = [
        r for k in args.types for r in measure_type(k, args.calls, args.rounds, args.stub_launches)
    ]
    data = {
        "gpu": torch.cuda.get_device_name() if ON_GPU else "CPU",
        "torch": torch.__version__,
        "triton": triton.__version__,
        "commit": args.commit,
        "date": dt.datetime.now(dt.UTC).strftime("%Y-%m-%d"),
        "calls": args.calls,
        "rounds": args.rounds,
        "stub_launches": args.stub_launches,
        "rows": rows,
    }
    table = markdown(data)
    if args.json:
        args.json.write_text(json.dumps(data, indent=1) + "\n")
    if args.out:
        args.out.write_text(table)
    # A stubbed run answers a different question (our Python alone): its own name keeps it from
    # replacing the real per-call figure in latest.md.
    question = "host_overhead (launches stubbed)" if args.stub_launches else "host_overhead"
    runner.record(question, rows, table, commit=args.commit, results=args.results,
                  extra={k: data[k] for k in ("calls", "rounds", "stub_launches")})  # fmt: skip
    print(table)


if __name__ == "__main__":
    main()
