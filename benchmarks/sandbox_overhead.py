"""What containment costs per evaluation: start-up with and without the bwrap sandbox.

Three measurements, each the median of --n runs, alternating contained and plain so drift in
the machine's load hits both alike:
- bare: `python -c pass` (the namespaces and mounts alone);
- worker: a worker process from its start to its ready file (interpreter, torch, triton and
  harness imports, CUDA context on a GPU), as prestart.Worker starts it;
- evaluate (with --evals K > 0): K full evaluations of a starter kernel (--quick, no timing),
  reported as the harness's own wall time per evaluation, spare worker kept warm as in a run.

Prints one JSON object. The issue's goal: at most 0.3 s of overhead per evaluation on the H200.

    python -m benchmarks.sandbox_overhead --n 10            # CPU here: bare and worker
    python -m benchmarks.sandbox_overhead --n 10 --evals 5  # the GPU box
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

from autokernel.harness import containment, prestart, sandbox  # noqa: E402
from benchmarks import runner  # noqa: E402

READY_TIMEOUT_S = 600.0


def _set_mode(contained: bool) -> str:
    """Switch containment on or off for this process; returns the kind now in use."""
    if contained:
        os.environ.pop(containment.SANDBOX_ENV, None)
    else:
        os.environ[containment.SANDBOX_ENV] = "off"
    containment.probe.cache_clear()
    prestart.discard()  # a spare of the other mode would not match anyway
    return containment.kind()


def _bare() -> float:
    work = Path(tempfile.mkdtemp(prefix="autokernel-bench-"))
    try:
        argv, env = containment.wrap([sys.executable, "-c", "pass"], dict(os.environ), work)
        t0 = time.perf_counter()
        subprocess.run(argv, env=env, check=True)
        return time.perf_counter() - t0
    finally:
        shutil.rmtree(work, ignore_errors=True)


def _worker(force_cpu: bool) -> float:
    env = sandbox.worker_env()
    t0 = time.perf_counter()
    worker = prestart.Worker.start(force_cpu, env)
    try:
        while not worker.ready():
            if not worker.alive() or time.perf_counter() - t0 > READY_TIMEOUT_S:
                err = (worker.work / "stderr").read_text()[-2000:]
                raise RuntimeError(f"worker died before ready: {err}")
            time.sleep(0.005)
        return time.perf_counter() - t0
    finally:
        worker.close()


def _evaluate(kernel: Path, force_cpu: bool, n: int) -> dict:
    """Median harness seconds of n warm evaluations per mode: each waits, as a run's next
    experiment would while the agent proposes, until the spare worker is ready."""
    opts = sandbox.Options(quick=True, timing=False, compile_baseline=False, force_cpu=force_cpu)
    out = {}
    for mode in ("contained", "plain"):
        _set_mode(mode == "contained")
        times = []
        for i in range(n + 1):  # the first warms the caches and starts the first spare
            spare = prestart.spare()
            while spare is not None and spare.alive() and not spare.ready():
                time.sleep(0.01)
            verdict = sandbox.evaluate(kernel, opts)
            if verdict.status.value != "PASS":
                raise RuntimeError(f"{kernel}: {verdict.message}")
            if i:
                times.append(verdict.harness_s)
        out[f"{mode}_s"] = round(statistics.median(times), 4)
        out[f"{mode}_all_s"] = [round(t, 4) for t in times]
    out["overhead_s"] = round(out["contained_s"] - out["plain_s"], 4)
    return out


def _paired(n: int, measure: Callable[[], float], warmup: int = 1) -> dict:
    """Median seconds contained and plain, measured alternately after warm-up runs of each."""
    times: dict[str, list[float]] = {"contained": [], "plain": []}
    kinds = {}
    for i in range(warmup + n):
        for mode in ("contained", "plain"):
            kinds[mode] = _set_mode(mode == "contained")
            seconds = measure()
            if i >= warmup:
                times[mode].append(seconds)
    contained, plain = (statistics.median(times[m]) for m in ("contained", "plain"))
    return {
        "contained_s": round(contained, 4), "plain_s": round(plain, 4),
        "overhead_s": round(contained - plain, 4), "kind": kinds["contained"],
        "runs": n, "contained_all_s": [round(t, 4) for t in times["contained"]],
        "plain_all_s": [round(t, 4) for t in times["plain"]],
    }  # fmt: skip


def main() -> int:
    parser = runner.add_arguments(argparse.ArgumentParser(description=__doc__.splitlines()[0]))
    parser.add_argument("--n", type=int, default=10, help="runs per mode and measurement")
    parser.add_argument("--evals", type=int, default=0, help="full evaluations per mode")
    parser.add_argument("--kernel", type=Path, default=ROOT / "kernels" / "softmax.py")
    parser.add_argument("--cpu", action="store_true", help="force the CPU interpreter")
    args = parser.parse_args()
    probe = containment.probe()
    if probe.kind == containment.NONE:
        print(json.dumps({"available": False, "reason": probe.reason}))
        return 1
    import torch

    force_cpu = args.cpu or not torch.cuda.is_available()
    out: dict = {
        "available": True, "binary": probe.binary, "device": "cpu" if force_cpu else "cuda",
        "python": sys.version.split()[0], "torch": torch.__version__,
    }  # fmt: skip
    out["bare"] = _paired(args.n, _bare)
    out["worker_start"] = _paired(args.n, lambda: _worker(force_cpu))
    if args.evals > 0:
        out["evaluate_warm"] = _evaluate(args.kernel.resolve(), force_cpu, args.evals)
    _set_mode(True)
    text = json.dumps(out, indent=1)
    runner.record("sandbox_overhead", [out], f"```json\n{text}\n```", commit=args.commit,
                  results=args.results)  # fmt: skip
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
