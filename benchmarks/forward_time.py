"""Where does a forward's time go: the host issuing it, or the GPU running it? For a model and a
workspace's kernels: eager, patched with all of them, patched with each alone, and torch.compile.

    python -m benchmarks.forward_time --workspace WS --hf-config cfg.json --input-shape 4x1024
    python -m benchmarks.forward_time --starters --hf-config llama.json --input-shape 4x1024

Per variant (verify's own Variant, so exactly what verify times):
- wall ms: the forward timed as verify times it (autokernel.timing.measure, median);
- host ms: the time Python takes to issue the forward while the GPU is held busy by a sleep
  kernel queued first, so no launch waits for the GPU (a forward that synchronises inside shows
  up as host time near the sleep's length);
- gpu ms: CUDA events around the forward's own kernels, which run back to back after the sleep:
  the GPU time with no host gaps.
A forward whose wall time is near its host time is host-bound: a faster kernel cannot shorten
it, and host time added by patching lengthens it one for one.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

import torch

from autokernel.model.loading import ModelSource, load_model
from autokernel.model.verify.modes import Variant, recompile_limit
from autokernel.model.verify.verifier import collect_kernels
from autokernel.timing import measure
from benchmarks import runner

SLEEP_S = 0.2  # GPU held this long before each forward: longer than any host issue time here
REPS = 7


def host_and_gpu_ms(fn, cycles_per_s: float) -> tuple[float, float]:
    hosts, gpus = [], []
    for _ in range(REPS):
        torch.cuda.synchronize()
        torch.cuda._sleep(int(SLEEP_S * cycles_per_s))
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        t0 = time.perf_counter()
        fn()
        hosts.append((time.perf_counter() - t0) * 1e3)
        end.record()
        torch.cuda.synchronize()
        gpus.append(start.elapsed_time(end))
    return statistics.median(hosts), statistics.median(gpus)


def sleep_rate() -> float:
    """GPU clock cycles per second as torch.cuda._sleep counts them."""
    torch.cuda.synchronize()
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    torch.cuda._sleep(100_000_000)
    end.record()
    torch.cuda.synchronize()
    return 100_000_000 / (start.elapsed_time(end) / 1e3)


def run(args: argparse.Namespace) -> list[dict]:
    src = ModelSource(path=Path(args.model) if args.model else None, hf_config=args.hf_config,
                      input_shape=tuple(int(n) for n in args.input_shape.split("x"))
                      if args.input_shape else None)  # fmt: skip
    loaded = load_model(src)
    if args.starters:
        from benchmarks.models import starter_workspace

        args.workspace = str(starter_workspace())
    kernels, _, _ = collect_kernels(Path(args.workspace), skip_slower=False)
    rate = sleep_rate()
    variants = [("eager", [], False), ("patched", kernels, False)]
    if len(kernels) > 1:
        variants += [(f"patched: {k.name}", [k], False) for k in kernels]
    if args.compile:
        variants += [("compile", [], True)]
    rows = []
    with recompile_limit():
        for label, ks, compiled in variants:
            v = Variant(loaded.model, loaded.inputs, ks, compiled=compiled)
            try:
                for _ in range(3):
                    v()
                host, gpu = host_and_gpu_ms(v, rate)
                wall = measure(v, True).median_us / 1e3
            finally:
                v.close()
            rows.append({"variant": label, "kernels": [k.name for k in ks],
                         "wall_ms": round(wall, 4), "host_ms": round(host, 4),
                         "gpu_ms": round(gpu, 4)})  # fmt: skip
            print(json.dumps(rows[-1]), flush=True)
    return rows


def markdown(model: str, rows: list[dict]) -> str:
    lines = [f"## {model}: host and GPU time per forward", "",
             "| variant | wall ms | host ms | GPU ms | bound |", "|---|---|---|---|---|"]  # fmt: skip
    for r in rows:
        bound = "host" if r["host_ms"] >= 0.9 * r["wall_ms"] else "GPU"
        lines.append(f"| {r['variant']} | {r['wall_ms']:.3f} | {r['host_ms']:.3f} | "
                     f"{r['gpu_ms']:.3f} | {bound} |")  # fmt: skip
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("model", nargs="?", help="a model file (KernelBench convention)")
    ap.add_argument("--workspace", help="a run's workspace (its optimized kernels)")
    ap.add_argument("--starters", action="store_true", help="the shipped starters instead")
    ap.add_argument("--hf-config")
    ap.add_argument("--input-shape")
    ap.add_argument("--no-compile", dest="compile", action="store_false")
    ap.add_argument("--json", type=Path, help="also write the rows here")
    args = runner.add_arguments(ap).parse_args(argv)
    if bool(args.workspace) == bool(args.starters):
        print("error: give exactly one of --workspace DIR or --starters", file=sys.stderr)
        return 2
    if not torch.cuda.is_available():
        print("error: needs CUDA (host and GPU time of a forward)", file=sys.stderr)
        return 2
    rows = run(args)
    name = Path(args.hf_config or args.model or "model").stem
    if args.json:
        args.json.write_text(json.dumps(rows, indent=1) + "\n")
    runner.record("forward_time", rows, markdown(name, rows), commit=args.commit,
                  results=args.results, extra={"model": name})  # fmt: skip
    return 0


if __name__ == "__main__":
    sys.exit(main())
