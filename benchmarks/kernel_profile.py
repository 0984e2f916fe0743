"""Hardware counters behind each goal of issue 5 that the benchmark misses: what Nsight Compute
reads of our kernel, and of the baseline it loses to, at the same size and on the same inputs.

Why: a missed goal needs its limit named from measurements. Per call this gives the bytes DRAM
actually moved against the bytes the spec counts (a second read of x shows up here), the kernel
time without the host, DRAM throughput as a share of its peak, achieved against theoretical
occupancy, registers, local-memory (spill) traffic and the L2 hit rate. Beside it sits the
benchmark's do_bench median of the same variant (--bench-json): where that is well above the
kernel time, the host, not the kernel, sets the figure.

    python -m benchmarks.kernel_profile --out P.md --json P.json --commit C [--bench-json B.json]

Each target runs in its own process under `ncu --profile-from-start off`; the target warms its
variant up, then calls it once between cudaProfilerStart and Stop. Without ncu or CUDA (CI) the
targets run bare at interpreter sizes: the rows then carry no counters, only a CPU time.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import torch

import benchmarks.bench_cases  # noqa: F401  (sets TRITON_INTERPRET before triton loads, on CPU)
import benchmarks.ncu_counters as ncu
from autokernel.atomic import write_atomic
from autokernel.specs import SPECS, dtype_name, parse_dtype
from benchmarks import runner
from benchmarks.bench_cases import BF16, COMPILE, EAGER, FP16, ON_GPU, OURS, ROOT

TARGET_TIMEOUT_S = 150
COMPILE_TIMEOUT_S = 300  # a cold max-autotune compile under ncu's interception
MARK = "KPROFILE "


def _rc(rows: int, cols: int) -> dict[str, int]:
    return {"rows": rows, "cols": cols}


def _rot(b: int, s: int) -> dict[str, int]:
    return {"batch": b, "heads": 32, "seq": s, "head_dim": 128}


# (op, size, dtype, variants): each size where the da37352 benchmark missed a goal, with the
# baseline that beat it, plus fused_mlp (compute-bound: the counters show where its time goes).
TARGETS: tuple[tuple[str, dict[str, int], torch.dtype, tuple[str, ...]], ...] = (
    ("softmax", _rc(4096, 50257), FP16, (OURS, EAGER)),
    ("rmsnorm", _rc(16384, 8192), BF16, (OURS, COMPILE)),
    ("rotary_embedding", _rot(4, 4096), BF16, (OURS, COMPILE)),
    ("reduce", _rc(16384, 8192), BF16, (OURS, COMPILE)),
    ("reduce", _rc(262144, 128), BF16, (OURS, COMPILE)),
    ("reduce", _rc(32768, 128), BF16, (OURS, EAGER)),
    ("softmax", _rc(32768, 128), BF16, (OURS, EAGER)),
    ("rmsnorm", _rc(32768, 128), BF16, (OURS, EAGER)),
    ("softmax", _rc(262144, 128), BF16, (OURS,)),
    ("rmsnorm", _rc(262144, 128), BF16, (OURS,)),
    ("layernorm", _rc(262144, 128), BF16, (OURS,)),
    ("rmsnorm", _rc(4096, 50257), BF16, (OURS,)),
    ("layernorm", _rc(4096, 50257), BF16, (OURS,)),
    ("reduce", _rc(4096, 50257), BF16, (OURS,)),
    ("cross_entropy", {"rows": 8192, "vocab": 50257}, BF16, (OURS,)),
    ("cross_entropy", {"rows": 16384, "vocab": 32000}, BF16, (OURS,)),
    ("rotary_embedding", _rot(1, 16384), BF16, (OURS,)),
    ("fused_mlp", {"M": 4096, "hidden": 4096, "inter": 11008}, BF16, (OURS, EAGER)),
)
SMOKE_OPS = ("softmax", "reduce")  # CPU: the plumbing only
# --narrow: where the benchmark's figure is host-bound, ours and eager at both narrow sizes (run
# with --no-ncu, the graph-replay time is the kernel's own and do_bench's includes the host).
NARROW: tuple[tuple[str, dict[str, int], torch.dtype, tuple[str, ...]], ...] = tuple(
    (op, _rc(rows, 128), BF16, (OURS, EAGER))
    for op in ("softmax", "rmsnorm", "layernorm", "reduce")
    for rows in (32768, 262144)
)


def _variant_fn(op: str, variant: str, args: tuple) -> Any:
    from benchmarks.bench_variants import _compiled, _eager, load_kernels

    spec = SPECS[op]
    if variant == OURS:
        fn = next(fn for v, fn, _ in load_kernels(ROOT / "kernels", op) if v == OURS)
        if fn is None:
            raise RuntimeError(f"kernels/{op}.py does not import")
        return fn
    if variant == EAGER:
        return _eager(spec)
    if variant == COMPILE:
        return _compiled(spec, args)
    raise ValueError(f"unknown variant {variant!r}")


def run_target(op: str, size: dict[str, int], dtype: torch.dtype, variant: str) -> None:
    """The process ncu watches: warm up (compiles, autotunes), then one call in the range."""
    from autokernel.timing import measure

    device = torch.device("cuda" if ON_GPU else "cpu")
    gen = torch.Generator(device=device).manual_seed(0)
    args = SPECS[op].make_inputs(size, dtype, gen, device)
    fn = _variant_fn(op, variant, args)
    for _ in range(3):
        out = fn(*args)
    info: dict[str, Any] = {"out_bytes": out.numel() * out.element_size()}
    del out
    if os.environ.get("KPROFILE_TIME") == "1":  # bare run: no ncu, times of our own
        info["us"] = measure(lambda: fn(*args), ON_GPU).median_us
        # Not under ncu: with ncu attached, replays measured 60-120 us above the kernel (H200).
        if ON_GPU and variant != COMPILE:  # max-autotune already replays a CUDA graph
            info.update(_graph_time(fn, args))
    if ON_GPU:
        torch.cuda.synchronize()
        torch.cuda.profiler.start()
        fn(*args)
        torch.cuda.synchronize()
        torch.cuda.profiler.stop()
    print(MARK + json.dumps(info), flush=True)


def _graph_time(fn: Any, args: tuple) -> dict[str, Any]:
    """GPU time of one call with no host in it: the call captured in a CUDA graph, replayed by
    do_bench (L2 flushed before each replay). Beside the benchmark's figure, the difference is
    what the host's launch path costs a kernel shorter than it."""
    from autokernel.timing import measure

    try:
        side = torch.cuda.Stream()
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):
            fn(*args)
        torch.cuda.current_stream().wait_stream(side)
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            fn(*args)
        return {"graph_us": measure(graph.replay, True).median_us}
    except Exception as exc:  # a variant that cannot be captured still gets its counters
        return {"graph_error": f"{type(exc).__name__}: {exc}"[:200]}


def profile(
    op: str,
    size: dict[str, int],
    dtype: torch.dtype,
    variant: str,
    metrics: tuple[str, ...],
    left_s: float,
    use_ncu: bool = True,
) -> dict[str, Any]:
    """One target under ncu (retrying without metrics ncu does not know), or bare without it;
    never past left_s, so the files are written before an outer timeout."""
    argv = [sys.executable, "-m", "benchmarks.kernel_profile", "--target", op, json.dumps(size)]
    argv += [dtype_name(dtype), variant]
    deadline = time.perf_counter() + left_s
    spec = SPECS[op]
    record: dict[str, Any] = {
        "op": op,
        "shape": spec.label(size),
        "dtype": dtype_name(dtype),
        "variant": variant,
        "counted_bytes": spec.bytes_moved(size, dtype) if spec.bound == "memory" else None,
        "flops": spec.flops(size),
    }
    tool = ncu.available() if ON_GPU and use_ncu else None
    for _attempt in range(3):
        cmd = ncu.command(tool, metrics, argv) if tool else argv
        env = {**os.environ, "KPROFILE_TIME": "0" if tool else "1"}
        t0 = time.perf_counter()
        cap = COMPILE_TIMEOUT_S if variant == COMPILE else TARGET_TIMEOUT_S
        timeout = max(1.0, min(cap, deadline - t0))
        try:
            proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, env=env,
                                  cwd=ROOT)  # fmt: skip
            output, rc = proc.stdout + proc.stderr, proc.returncode
        except subprocess.TimeoutExpired as exc:
            partial = exc.stdout.decode(errors="replace") if exc.stdout else ""
            output, rc = f"timed out after {timeout:.0f} s: {partial}", -1
        record["wall_s"] = round(time.perf_counter() - t0, 1)
        marks = [ln[len(MARK) :] for ln in output.splitlines() if ln.startswith(MARK)]
        if marks:
            record.update(json.loads(marks[-1]))
        kernels = ncu.parse_raw_csv(output) if tool else []
        call = ncu.summarize(kernels)
        record["profile"] = call.to_json() if call else None
        record["metrics"] = list(metrics) if tool else []
        if (kernels or not tool) and rc == 0:
            record.pop("error", None)
            return record
        record["error"] = f"rc {rc}: " + output[-1500:]
        if not tool or rc == -1 or deadline - time.perf_counter() < 10:
            return record
        metrics = ncu.drop_unknown(metrics, output)
    return record


def _bench_us(bench: list[dict[str, Any]], rec: dict[str, Any]) -> float | None:
    for row in bench:
        key = (row.get("op"), row.get("shape"), row.get("dtype"), row.get("variant"))
        if key == (rec["op"], rec["shape"], rec["dtype"], rec["variant"]):
            return row.get("us")
    return None


def _fmt(x: float | None, digits: int = 1) -> str:
    return "–" if x is None else f"{x:,.{digits}f}"


def markdown(records: list[dict[str, Any]], head: list[str], bench: list[dict[str, Any]]) -> str:
    cols = (
        "op | shape | dtype | variant | bench µs | graph µs | DRAM read MB | counted read MB | "
        "read/counted | DRAM write MB | counted write MB | L2 hit % | occupancy achieved/theory "
        "% | regs | local B | grid x block | kernels | ncu µs | DRAM % peak | SM % peak"
    )
    lines = [*head, "", f"| {cols} |", "|" + "---|" * (cols.count("|") + 1)]
    for r in records:
        p = r.get("profile") or {}
        read, write = p.get("dram_read"), p.get("dram_write")
        counted, out_b = r.get("counted_bytes"), r.get("out_bytes")
        c_read = None if counted is None or out_b is None else counted - out_b
        ratio = None if read is None or not c_read else read / c_read
        occ = f"{_fmt(p.get('occ_achieved'), 0)}/{_fmt(p.get('occ_theory'), 0)}"
        shape = f"{p.get('grid', '–')} x {p.get('block', '–')}"
        bench_us = _bench_us(bench, r) or r.get("us")
        mb = 1e-6
        cells = [
            r["op"],
            r["shape"],
            r["dtype"],
            r["variant"],
            _fmt(bench_us),
            _fmt(r.get("graph_us")),
            _fmt(None if read is None else read * mb),
            _fmt(None if c_read is None else c_read * mb),
            _fmt(ratio, 2),
            _fmt(None if write is None else write * mb),
            _fmt(None if out_b is None or counted is None else out_b * mb),
            _fmt(p.get("l2_hit"), 0),
            occ,
            str(p.get("registers", "–")),
            _fmt(p.get("local_bytes"), 0),
            shape,
            str(len(p.get("kernels", []))) if p else "–",
            _fmt(p.get("us")),
            _fmt(p.get("dram_pct"), 0),
            _fmt(p.get("sm_pct"), 0),
        ]
        lines.append("| " + " | ".join(cells) + " |")
    errors = [r for r in records if r.get("error")]
    if errors:
        lines += ["", "## Targets without counters", ""]
        for r in errors:
            tail = " ".join(r["error"].split())[-400:]
            lines.append(f"- {r['op']} {r['shape']} {r['variant']}: {tail}")
    names = sorted({k for r in records for k in (r.get("profile") or {}).get("kernels", [])})
    lines += ["", "Kernels seen: " + ", ".join(f"`{n[:80]}`" for n in names), ""]
    return "\n".join(lines)


def _plan(
    smoke: bool, only: set[str], narrow: bool = False
) -> list[tuple[str, dict[str, int], torch.dtype, str]]:
    if smoke:
        return [
            (op, dict(SPECS[op].cpu.bench[0]), torch.float32, v)
            for op in SMOKE_OPS
            for v in (OURS, EAGER)
        ]
    targets = NARROW if narrow else TARGETS
    plan = [(op, s, d, v) for op, s, d, vs in targets for v in vs if not only or op in only]
    return sorted(plan, key=lambda t: t[3] == COMPILE)  # cold max-autotune compiles last


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--target", nargs=4, metavar=("OP", "SIZE_JSON", "DTYPE", "VARIANT"))
    p.add_argument("--out", type=Path, default=ROOT / "benchmarks/results/profile.md")
    p.add_argument("--json", type=Path, default=ROOT / "benchmarks/results/profile.json")
    p.add_argument("--bench-json", type=Path, help="h200-latest.json-style rows to set beside")
    p.add_argument("--types", default="", help="comma-separated ops (default: every target)")
    p.add_argument("--budget-s", type=float, default=540.0)
    p.add_argument("--smoke", action="store_true", help="CPU: interpreter sizes, no counters")
    p.add_argument("--narrow", action="store_true", help="ours and eager at the narrow sizes")
    p.add_argument("--no-ncu", action="store_true", help="no counters: do_bench and graph times")
    a = runner.add_arguments(p).parse_args(argv)
    a.commit = a.commit or runner.tree_commit()
    if a.target:
        op, size, dtype, variant = a.target
        run_target(op, json.loads(size), parse_dtype(dtype), variant)
        return 0
    only = {t for t in a.types.split(",") if t}
    unknown = only - set(SPECS)
    if unknown:
        p.error(f"unknown type(s) {sorted(unknown)}; known: {', '.join(sorted(SPECS))}")
    bench = json.loads(a.bench_json.read_text())["rows"] if a.bench_json else []
    t0, records, metrics = time.perf_counter(), [], ncu.METRICS
    plan = _plan(a.smoke, only, a.narrow)
    for i, (op, size, dtype, variant) in enumerate(plan):
        left = a.budget_s - (time.perf_counter() - t0)
        if left < 15:
            print(f"budget spent: {len(plan) - i} targets not profiled", flush=True)
            break
        rec = profile(op, size, dtype, variant, metrics, left, use_ncu=not a.no_ncu)
        metrics = tuple(rec.get("metrics") or metrics)  # what ncu refused once stays dropped
        records.append(rec)
        us = (rec.get("profile") or {}).get("us") or rec.get("us")
        print(f"[{i + 1}/{len(plan)}] {op} {rec['shape']} {variant}: {_fmt(us)} µs", flush=True)
        _write(a, records, bench)  # after every target: a cut run keeps what it measured
    runner.record("kernel_profile", records, _write(a, records, bench), commit=a.commit,
                  results=a.results)  # fmt: skip
    return 0


def _write(a: argparse.Namespace, records: list[dict[str, Any]], bench: list[dict]) -> str:
    tool = ncu.available() if ON_GPU and not a.no_ncu else None
    title = "Hardware counters of the goals missed" if tool else "Kernel and host times, no ncu"
    how = (
        f"- profiler: {tool}; clocks as the GPU runs them (--clock-control none); caches "
        "flushed before each kernel replay; one call per target after 3 warm-up calls."
        if tool
        else "- profiler: none (--no-ncu or no ncu/CUDA): the counter columns are empty; each "
        "target times itself after 3 warm-up calls."
    )
    head = [
        f"# {title} ({dt.date.today().isoformat()})",
        "",
        f"- GPU: {torch.cuda.get_device_name() if ON_GPU else 'none (CPU: no counters)'}; "
        f"torch {torch.__version__}; triton {__import__('triton').__version__}",
        f"- commit: {a.commit}; command: `python {' '.join(sys.argv)}`",
        how,
        "- read/counted: DRAM bytes read over the input bytes the spec counts (each input read "
        "once); above 1 means re-reads that missed L2. DRAM writes can read below the output: "
        "what is still dirty in L2 when the kernel ends is not yet written. local B: "
        "local-memory (spill) bytes. bench µs: do_bench median with the host launch in it "
        "(the benchmark's from --bench-json, else this run's own); graph µs: one call replayed "
        "from a CUDA graph (no host), L2 flushed, only in runs without ncu. ncu µs and the % of "
        "peak are read under replay, where the clocks can ramp down between passes: compare "
        "bytes and occupancy, not these times.",
    ]
    text = markdown(records, head, bench)
    write_atomic(a.out, text)
    write_atomic(a.json, json.dumps({"commit": a.commit, "records": records}, indent=1))
    return text


if __name__ == "__main__":
    sys.exit(main())
