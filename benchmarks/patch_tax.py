"""What patching alone costs the host per forward: every shipped kernel type plugged into a
model, each kernel replaced by a zero-cost stand-in (the reference's output for that call
signature, computed once and handed back), so the patched forward does no more work than the
plain one minus the ops it replaces. Patched minus eager is then the price of the plumbing:
matching each call, routing it through the custom op, swapping the model's functions and torch
callees in and out around the forward. A host-bound eager forward (a small HF model on a GPU)
slows by exactly this much when kernels are plugged in, whatever the kernels' own speed.

Host time = CPU time of the issuing thread (time.thread_time) for one forward: on a GPU the
launches are queued, not waited for; on a shared CPU it leaves out time spent descheduled. The
figure per variant is the lowest of ROUNDS medians of CALLS forwards, the variants interleaved.
On a GPU the replaced ops' own work is off the host, so the difference is the plumbing alone. On
the CPU the ops run on the issuing thread: the difference is the plumbing minus the replaced ops'
compute, a figure for tiny models (--tiny), where that compute is small; labelled CPU figures.

    python -m benchmarks.patch_tax examples/llama_style.py
    python -m benchmarks.patch_tax --family gpt2 --tiny      # needs transformers
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path

import torch

if not torch.cuda.is_available():
    os.environ.setdefault("TRITON_INTERPRET", "1")  # the starters import triton

from autokernel.model.kernel_ops import _REFERENCE, LoadedKernel
from autokernel.model.loading import ModelSource, load_model
from autokernel.model.verify.modes import Variant
from autokernel.model.verify.verifier import collect_kernels
from benchmarks import runner

ROUNDS = 6
CALLS = 100


def stand_in(reference: Callable[..., torch.Tensor]) -> Callable[..., torch.Tensor]:
    """A kernel_fn that costs nothing after its first call per signature: the reference's output,
    kept. The router clones an output that aliases an input, as for a real kernel."""
    kept: dict[tuple, torch.Tensor] = {}

    def kernel_fn(*args: object) -> torch.Tensor:
        key = tuple((a.shape, a.dtype, a.device) if isinstance(a, torch.Tensor) else a
                    for a in args)  # fmt: skip
        out = kept.get(key)
        if out is None:
            out = kept[key] = reference(*args)
        return out

    return kernel_fn


def stand_ins(kernels: list[LoadedKernel]) -> list[LoadedKernel]:
    return [dataclasses.replace(k, fn=stand_in(_REFERENCE[k.kernel_type]))
            for k in kernels if k.kernel_type in _REFERENCE]  # fmt: skip


def host_us(fn: Callable[[], object], calls: int) -> float:
    """Median CPU time of the issuing thread per call, the device drained first."""
    times = []
    for _ in range(calls):
        if torch.cuda.is_available():
            torch.cuda.synchronize()
        t0 = time.thread_time()
        fn()
        times.append((time.thread_time() - t0) * 1e6)
    return statistics.median(times)


def measure(model_name: str, model, inputs: list, rounds: int, calls: int) -> list[dict]:
    from benchmarks.models import starter_workspace

    kernels, _, _ = collect_kernels(starter_workspace(), skip_slower=False)
    variants = {"eager": Variant(model, inputs, []),
                "patched (zero-cost kernels)": Variant(model, inputs, stand_ins(kernels))}  # fmt: skip
    best: dict[str, float] = {}
    try:
        for v in variants.values():
            for _ in range(3):
                v()  # first calls fill the route caches and the stand-ins
        for v in variants.values():
            if v.patch:
                v.patch.reset_counts()
        for r in range(rounds):
            order = list(variants) if r % 2 == 0 else list(reversed(variants))
            for label in order:
                t = host_us(variants[label], calls)
                best[label] = min(best.get(label, t), t)
        rows = []
        eager = best["eager"]
        for label, v in variants.items():
            routed = 0.0
            if v.patch:
                counts = v.patch.counts()
                routed = sum(c["kernel"] for c in counts.values()) / (rounds * calls)
            tax = best[label] - eager
            rows.append({"model": model_name, "variant": label, "host_us": round(best[label], 1),
                         "routed_calls": round(routed, 2), "tax_us": round(tax, 1),
                         "tax_per_call_us": round(tax / routed, 2) if routed else None})  # fmt: skip
        return rows
    finally:
        for v in variants.values():
            v.close()


def markdown(rows: list[dict], clock: str) -> str:
    lines = [f"## Host time patching adds per forward ({clock})", "",
             "| model | variant | host µs | routed calls | patched − eager µs | per call µs |",
             "|---|---|---|---|---|---|"]  # fmt: skip
    for r in rows:
        per = "-" if r["tax_per_call_us"] is None else f"{r['tax_per_call_us']:.2f}"
        lines.append(f"| {r['model']} | {r['variant']} | {r['host_us']:.1f} | "
                     f"{r['routed_calls']:.2f} | {r['tax_us']:+.1f} | {per} |")  # fmt: skip
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("model", nargs="?", help="a model file (KernelBench convention)")
    ap.add_argument("--family", help="an HF family of benchmarks.models instead (llama, gpt2...)")
    ap.add_argument("--tiny", action="store_true", help="the family at CPU size")
    ap.add_argument("--rounds", type=int, default=ROUNDS)
    ap.add_argument("--calls", type=int, default=CALLS, help="forwards per round and variant")
    args = runner.add_arguments(ap).parse_args(argv)
    if bool(args.model) == bool(args.family):
        print("error: give a model file or --family NAME", file=sys.stderr)
        return 2
    if args.rounds < 1 or args.calls < 1:
        print("error: --rounds and --calls must be at least 1", file=sys.stderr)
        return 2
    gpu = torch.cuda.is_available()
    if args.family:
        from benchmarks.models import GPU, BenchError, build

        if args.family not in GPU:
            print(f"error: --family: one of {', '.join(GPU)}", file=sys.stderr)
            return 2
        device = torch.device("cuda" if gpu else "cpu")
        try:
            model, inputs, _ = build(args.family, args.tiny or not gpu, device,
                                     torch.bfloat16 if gpu else torch.float32)  # fmt: skip
        except BenchError as exc:
            print(f"error: {exc}", file=sys.stderr)
            return 2
        name = args.family + (" (tiny)" if args.tiny or not gpu else "")
    else:
        loaded = load_model(ModelSource(path=Path(args.model)))
        model, inputs, name = loaded.model, loaded.inputs, Path(args.model).stem
    with torch.no_grad():
        rows = measure(name, model, inputs, args.rounds, args.calls)
    clock = "thread CPU time, " + ("GPU launches queued" if gpu else "CPU figures")
    text = markdown(rows, clock)
    print(text)
    runner.record("patch_tax", rows, text, commit=args.commit, results=args.results,
                  extra={"model": name})  # fmt: skip
    return 0


if __name__ == "__main__":
    sys.exit(main())
