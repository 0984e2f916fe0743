"""Where a harness evaluation spends its time, and what disturbs its narrow-row timings.

Three probes, each in the state a worker is in (worker._prepare done, kernels from kernels/):

- ``profile TYPE``: cProfile of the five stages of one starter. Run it twice on a machine: the
  first run compiles, the second shows what a warm evaluation still pays (on the H200 that found
  the first dispatch mode's imports, now done by the spare).
- ``narrow``: softmax, rmsnorm, layernorm and reduce at 262144x128. For each: the do_bench
  median in a fresh process, the host time per call (calls queued without a sync), medians
  taken while another process starts up beside it (as a spare does), and the harness's own
  benchmark after the five stages ran in the same process.
- ``hostprof``: cProfile of 300 queued calls of kernel_fn at 262144x128 (host side only).
- ``benchprof TYPE``: the benchmark stage of one starter (its timed sizes, after the five
  stages ran in the same process), timed twice, the second under cProfile: where a warm
  evaluation's benchmark seconds go (on the H200 it is over half of the warm harness time).

CPU runs (the interpreter, 64 rows) only check that the probes work; their figures are
meaningless.
"""

from __future__ import annotations

import cProfile
import io
import pstats
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

T0 = time.perf_counter()
NARROW_TYPES = ("layernorm", "reduce", "rmsnorm", "softmax")
USAGE = "usage: python -m benchmarks.harness_diag profile TYPE | benchprof TYPE | narrow | hostprof"
SPARE = (
    "import torch; torch.zeros(1, device='cuda'); torch.cuda.synchronize(); "
    "import triton, autokernel.specs, time; time.sleep(3)"
)


def stamp(msg: str) -> None:
    print(f"[{time.perf_counter() - T0:7.3f}s] {msg}", flush=True)


def _setup():
    """What a spare does before its request; returns (torch, device)."""
    from autokernel.harness import worker

    device = worker._prepare(False)
    import torch

    return torch, torch.device(device)


def _sync(torch, device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize()


def _kernel(kind: str):
    from autokernel.harness.serve import load_candidate

    return load_candidate(ROOT / "kernels" / f"{kind}.py", f"diag_{kind}")


def _local(kind: str, device, mod=None):
    """The judge's view of one of our starters, run in this process (harness/local.py)."""
    from autokernel.harness.local import LocalProcess
    from autokernel.specs import SPECS

    proc = LocalProcess(SPECS[kind], [mod or _kernel(kind)], device, 1)
    return proc, proc.evaluation()


def _print_stats(pr: cProfile.Profile, key: str, n: int) -> None:
    s = io.StringIO()
    pstats.Stats(pr, stream=s).sort_stats(key).print_stats(n)
    print(s.getvalue())


def profile(kind: str) -> None:
    _, device = _setup()
    stamp(f"prepared ({device.type})")
    from autokernel.harness.stages import run_stages

    _, ev = _local(kind, device)
    pr = cProfile.Profile()
    pr.enable()
    run_stages(ev, progress=stamp)
    pr.disable()
    stamp("stages done")
    _print_stats(pr, "cumulative", 45)
    _print_stats(pr, "tottime", 25)


def benchprof(kind: str) -> None:
    torch, device = _setup()
    from autokernel.harness import worker
    from autokernel.harness.benchmark import Peaks, time_candidate
    from autokernel.harness.stages import run_stages

    mod = _kernel(kind)
    peaks = Peaks(**worker._peaks(device, torch.bfloat16))
    for attempt in ("first", "profiled"):
        proc, ev = _local(kind, device, mod)  # the timing refills its buffers: one use each
        run_stages(ev)
        pr = cProfile.Profile()
        t = time.perf_counter()
        if attempt == "profiled":
            pr.enable()
        timings = time_candidate(ev, proc, torch.bfloat16, peaks, {})
        pr.disable()
        stamp(f"{kind} benchmark ({attempt}): {time.perf_counter() - t:.2f} s; "
              f"{[(t.size, round(t.us, 1)) for t in timings]}")  # fmt: skip
    _print_stats(pr, "cumulative", 40)
    _print_stats(pr, "tottime", 20)


def _narrow_args(torch, device, kind: str) -> tuple:
    from autokernel.specs import SPECS

    rows = 262144 if device.type == "cuda" else 64
    gen = torch.Generator(device=device).manual_seed(1)
    return SPECS[kind].make_inputs({"rows": rows, "cols": 128}, torch.bfloat16, gen, device)


def narrow() -> None:
    torch, device = _setup()
    on_gpu = device.type == "cuda"
    from autokernel.harness import worker
    from autokernel.harness.benchmark import Peaks, time_candidate
    from autokernel.harness.stages import run_stages
    from autokernel.timing import measure

    for kind in NARROW_TYPES:
        mod = _kernel(kind)
        args = _narrow_args(torch, device, kind)

        def fn(mod=mod, args=args):
            return mod.kernel_fn(*args)

        fn()
        _sync(torch, device)
        fresh = measure(fn, on_gpu).median_us
        calls = 500 if on_gpu else 3
        t = time.perf_counter()
        for _ in range(calls):
            fn()
        host = (time.perf_counter() - t) / calls * 1e6
        _sync(torch, device)
        wall = (time.perf_counter() - t) / calls * 1e6
        stamp(f"{kind} {args[0].shape[0]}x128 fresh process: do_bench median {fresh:.1f} us; host per call "
              f"{host:.1f} us; wall per call {wall:.1f} us")  # fmt: skip
        if on_gpu:
            spare = subprocess.Popen([sys.executable, "-c", SPARE])
            during = []
            while spare.poll() is None and len(during) < 12:
                during.append(round(measure(fn, True).median_us, 1))
            spare.wait()
            stamp(f"{kind} while a spare process starts: {during}")
        proc, ev = _local(kind, device, mod)
        run_stages(ev)
        peaks = Peaks(**worker._peaks(device, torch.bfloat16))
        timings = time_candidate(ev, proc, torch.bfloat16, peaks, {})
        again = measure(fn, on_gpu).median_us
        stamp(f"{kind} after stages: harness timings "
              f"{[(t.size, round(t.us, 1)) for t in timings]}; re-measured same args {again:.1f} us")  # fmt: skip


def hostprof() -> None:
    torch, device = _setup()
    for kind in ("reduce", "layernorm", "softmax"):
        mod = _kernel(kind)
        args = _narrow_args(torch, device, kind)
        calls = 300 if device.type == "cuda" else 3
        for _ in range(min(calls, 20)):
            mod.kernel_fn(*args)
        _sync(torch, device)
        pr = cProfile.Profile()
        t = time.perf_counter()
        pr.enable()
        for _ in range(calls):
            mod.kernel_fn(*args)
        pr.disable()
        host = (time.perf_counter() - t) / calls * 1e6
        _sync(torch, device)
        stamp(f"{kind}: host per call under cProfile {host:.1f} us")
        _print_stats(pr, "tottime", 18)


def main(argv: list[str]) -> int:
    if argv[:1] == ["profile"] and len(argv) == 2:
        profile(argv[1])
    elif argv[:1] == ["benchprof"] and len(argv) == 2:
        benchprof(argv[1])
    elif argv == ["narrow"]:
        narrow()
    elif argv == ["hostprof"]:
        hostprof()
    else:
        print(USAGE, file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
