"""The evaluation worker: the only process that imports candidate code.

Started by the sandbox (`python -m autokernel.harness.worker WORK_DIR cpu|auto`), possibly
long before it is needed: it first imports everything that is not candidate-specific, creates
WORK_DIR/ready, and only then reads its one request from stdin (see prestart.py). It writes a
progress file (the stage it is in, so a timeout can say where it hung) and the result JSON: a
verdict, or with "mode": "compare" a Comparison of two kernel files timed interleaved. Baselines
and ceilings are measured before the candidate is imported, so nothing the candidate does can
change them.
"""

from __future__ import annotations

import importlib.util
import json
import os
import shutil
import signal
import sys
import threading
import time
import traceback
from pathlib import Path
from typing import Any

# CLOCK_MONOTONIC, shared with the parent on Linux: its "handed_at" is comparable with this.
T_START = time.monotonic()  # before torch is imported: start-up is part of the cost


class Progress:
    """Writes the current phase for the parent (so a timeout can say where it hung) and
    records how long each phase took (so the harness's own cost is visible)."""

    def __init__(self, path: Path, t0: float) -> None:
        self.path, self.phase, self.since = path, "start-up", t0
        self.seconds: dict[str, float] = {}

    def __call__(self, phase: str) -> None:
        now = time.monotonic()
        self.seconds[self.phase] = self.seconds.get(self.phase, 0.0) + now - self.since
        self.phase, self.since = phase, now
        self.path.write_text(phase)


def _load_candidate(path: Path, name: str = "autokernel_candidate"):
    spec = importlib.util.spec_from_file_location(name, path)
    if spec is None or spec.loader is None:
        raise ImportError(f"cannot load {path}")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _install_stream_guard(torch, active: list[bool] | None = None) -> list[str]:
    """Record any attempt to create or switch CUDA streams (the static guard forbids naming
    them; this catches a path around it). With `active`, only while active[0] is true: the
    harness's own timing code may create streams."""
    seen: list[str] = []
    for name in ("Stream", "set_stream", "stream", "ExternalStream"):
        original = getattr(torch.cuda, name, None)
        if original is None:
            continue

        def wrapped(*a, __name=name, __orig=original, **k):
            if active is None or active[0]:
                seen.append(f"torch.cuda.{__name}")
            return __orig(*a, **k)

        setattr(torch.cuda, name, wrapped)
    return seen


def _peaks(device, spec, dtype):
    from autokernel.harness.benchmark import Peaks

    if device.type != "cuda":
        return Peaks(None, None), None
    from autokernel import gpu

    info = gpu.detect()
    ceilings = gpu.load_or_measure()
    return Peaks(
        gpu.peak_bandwidth_gbs(info, ceilings), gpu.peak_tflops(info, ceilings, dtype)
    ), info


def _setting(req: dict[str, Any]):
    """Device, spec and benchmark dtype of the request."""
    import torch

    from autokernel.specs import get_spec, parse_dtype

    on_gpu = torch.cuda.is_available() and not req.get("force_cpu")
    if not on_gpu:
        os.environ["TRITON_INTERPRET"] = "1"  # before triton or the candidate is imported
    spec = get_spec(req["kernel_type"])
    dtype = parse_dtype(req["dtype"]) if req.get("dtype") else (
        spec.bench_dtype_gpu if on_gpu else spec.bench_dtype_cpu
    )  # fmt: skip
    return torch.device("cuda" if on_gpu else "cpu"), spec, dtype


def evaluate(req: dict[str, Any], progress: Progress) -> Any:
    import torch

    from autokernel.harness import baselines
    from autokernel.harness.benchmark import bench_sizes, geomean, time_candidate
    from autokernel.harness.compiled import spilled_registers
    from autokernel.harness.stages import Evaluation, StageFailure, run_stages
    from autokernel.harness.timing import clock_name
    from autokernel.harness.verdict import Check, Status, Verdict

    device, spec, dtype = _setting(req)
    on_gpu = device.type == "cuda"
    seed = int(req["seed"])
    extra = tuple(req.get("extra_sizes") or ())
    verdict = Verdict(
        status=Status.PASS, kernel_type=spec.name, file=req["file"], seed=seed,
        device=baselines.device_name(device), interpreter=not on_gpu, clock=clock_name(on_gpu),
    )  # fmt: skip
    ev = Evaluation(
        spec, kernel_fn=lambda *a: None, device=device, seed=seed, extra_sizes=extra,
        quick=bool(req.get("quick")), guard_runtime=req.get("guards", True),
    )  # fmt: skip
    with_compile = bool(req.get("compile_baseline", True))
    timing = bool(req.get("timing", True))
    peaks = None
    if timing:
        progress("baselines")
        notes = baselines.ensure(spec, bench_sizes(ev), dtype, device, seed, with_compile)
        verdict.guards += [f"baseline {k} unavailable: {v}" for k, v in notes.items()]
        peaks, _ = _peaks(device, spec, dtype)
    stream_uses = _install_stream_guard(torch) if on_gpu else []

    progress("import")
    try:
        module = _load_candidate(Path(req["file"]))
        kernel_fn = getattr(module, "kernel_fn", None)
        if not callable(kernel_fn):
            raise AttributeError("kernel.py defines no callable kernel_fn")
    except BaseException as exc:  # SyntaxError, ImportError, anything raised at import
        tb = "".join(traceback.format_exception(exc)[-8:])
        verdict.status = Status.CRASH
        verdict.failure = Check(
            "import", "", "", False, f"{type(exc).__name__}: {exc}\n{tb}"[-3000:]
        )
        verdict.message = f"import failed: {type(exc).__name__}: {exc}"
        return verdict
    ev.kernel_fn = kernel_fn
    if on_gpu:
        torch.cuda.reset_peak_memory_stats()

    try:
        run_stages(ev, progress=progress)
        if stream_uses:
            raise StageFailure(
                Status.REJECTED,
                Check("guards", "", "", False, f"kernel used {', '.join(sorted(set(stream_uses)))}:"
                      " launch on the current stream"),
            )  # fmt: skip
        if timing:
            await_quiet(req, progress)
            progress("benchmark")
            verdict.timings = time_candidate(ev, dtype, peaks, with_compile)
    except StageFailure as failure:
        verdict.status = failure.status
        verdict.failure = failure.check
        c = failure.check
        where = " ".join(x for x in (c.stage, c.size, c.dtype) if x)
        verdict.message = f"{failure.status.value} in {where}: {c.message.splitlines()[0]}"
    verdict.stages = ev.results
    verdict.speedup_vs_eager = geomean([t.speedup_vs_eager for t in verdict.timings])
    verdict.speedup_vs_compile = geomean([t.speedup_vs_compile for t in verdict.timings])
    verdict.spilled_registers = spilled_registers(module)
    if verdict.status is Status.PASS:
        verdict.message = "PASS: all five stages" + (
            f"; {verdict.speedup_vs_eager:.2f}x vs eager" if verdict.speedup_vs_eager else ""
        )
        if verdict.spilled_registers:
            verdict.message += f"; spilled {verdict.spilled_registers} registers per thread"
    if on_gpu:
        verdict.peak_mem_bytes = int(torch.cuda.max_memory_allocated())
    return verdict


def compare(req: dict[str, Any], progress: Progress) -> Any:
    """Both files (best, candidate) imported side by side, then timed interleaved."""
    import torch

    from autokernel.harness.benchmark import bench_sizes
    from autokernel.harness.interleave import ROLES, Comparison, compare_kernels
    from autokernel.harness.stages import Evaluation

    device, spec, dtype = _setting(req)
    # Both kernels passed a full evaluation (stream guard included) before they get here; the
    # guard watches their checked calls, not the timing code, which may create streams itself.
    checking = [True]
    stream_uses = _install_stream_guard(torch, checking) if device.type == "cuda" else []
    progress("import")
    evs = []
    for i, (role, file) in enumerate(zip(ROLES, req["files"], strict=True)):
        try:
            module = _load_candidate(Path(file), f"autokernel_{role}_{i}")
            kernel_fn = getattr(module, "kernel_fn", None)
            if not callable(kernel_fn):
                raise AttributeError("kernel.py defines no callable kernel_fn")
        except BaseException as exc:
            return Comparison(error=f"{role} kernel: import failed: {type(exc).__name__}: {exc}")
        evs.append(Evaluation(
            spec, kernel_fn, device, int(req["seed"]), tuple(req.get("extra_sizes") or ()),
            bool(req.get("quick")), req.get("guards", True),
        ))  # fmt: skip
    await_quiet(req, progress)
    result = compare_kernels(
        evs[0], evs[1], bench_sizes(evs[0]), dtype, req["rounds"], progress,
        checking=lambda on: checking.__setitem__(0, on),
    )  # fmt: skip
    if stream_uses and not result.error:
        result.error = f"a kernel used {', '.join(sorted(set(stream_uses)))}"
    return result


QUIET_WAIT_S = 30.0  # longest wait for the next spare's start-up before timing anyway


def await_quiet(req: dict[str, Any], progress: Progress) -> None:
    """Hold off timing until the sandbox says the spare started beside this worker is ready.

    Why: a process starting up (imports, CUDA context) beside the timed loop slowed kernels of
    tens of microseconds by up to 70 % on the H200, and the spare starts right at the hand-over.
    The wait costs the loop little: the next evaluation needs that spare ready anyway."""
    path = req.get("quiet")
    if not path or os.path.exists(path):
        return
    progress("waiting for the spare's start-up")
    deadline = time.monotonic() + QUIET_WAIT_S
    while not os.path.exists(path) and time.monotonic() < deadline:
        time.sleep(0.01)


def _prepare(force_cpu: bool) -> str:
    """Import what every request needs before the request comes, so the evaluation does not
    wait for it; return the device kind ("cuda" or "cpu"). TRITON_INTERPRET must be set before
    triton is imported."""
    import torch

    device = "cpu" if force_cpu or not torch.cuda.is_available() else "cuda"
    if device == "cpu":
        os.environ["TRITON_INTERPRET"] = "1"
    else:
        # The CUDA context too is the same for every candidate: create it while waiting, at
        # the cost of an idle context's device memory in the spare.
        torch.zeros(1, device="cuda")
        torch.cuda.synchronize()
    import triton  # every candidate imports it
    import triton.language

    pin_triton_cache(triton)

    import autokernel.gpu
    import autokernel.harness.benchmark
    import autokernel.harness.interleave
    import autokernel.specs  # noqa: F401
    from autokernel.harness.guards import TorchOpMonitor

    # Lazy first-use costs that every evaluation paid in its first stage, none of them the
    # candidate's (on the H200 a warm smoke stage took 3.5-4.7 s with every kernel cached;
    # profiled, it was all this): entering the first TorchDispatchMode imports torch._dynamo,
    # sympy and torch.distributed (mostly compiling their sources: that image ships no
    # bytecode), and Triton's first cache lookup hashes libtriton (0.5 s).
    with TorchOpMonitor():
        torch.empty(1, device=device)
    try:
        from triton.runtime.cache import triton_key

        triton_key()
        triton.runtime.driver.active.get_current_target()
    except Exception:  # private API in some Triton version: only a missed saving
        pass
    return device


def pin_triton_cache(triton) -> str:
    """Name Triton's cache directory in the environment before anything compiles; return it.

    Why: torch.compile (the baseline of a first evaluation) sets TRITON_CACHE_DIR to its own
    directory when it is unset, so that evaluation's kernels were compiled into Inductor's cache
    and the next worker, which finds the variable unset, compiled them all again (4-5 s on the
    H200). Pinning the directory Triton would pick anyway keeps one cache for every worker and
    leaves a user's own setting alone."""
    os.environ.setdefault("TRITON_CACHE_DIR", triton.knobs.cache.dir)
    return os.environ["TRITON_CACHE_DIR"]


PARENT_ENV = "AUTOKERNEL_PARENT_PID"  # set by prestart.py: the process that started this worker


def watch_parent(work: Path, interval_s: float = 0.5) -> None:
    """Kill this worker and everything the candidate started once its parent is gone.

    Why: the worker runs in its own session, so a harness killed outright (SIGTERM from a job
    timeout, SIGKILL) does not take it along, and an orphan kept timing on the GPU for minutes,
    skewing whatever ran next (seen on the H200). Polling the parent pid needs no cooperation
    from the parent and works however it died. A contained worker is not told the pid (it means
    nothing in its PID namespace): bwrap's --die-with-parent does this job there."""
    expected = int(os.environ.get(PARENT_ENV) or 0)
    if not expected:
        return

    def watch() -> None:
        while os.getppid() == expected:
            time.sleep(interval_s)
        shutil.rmtree(work, ignore_errors=True)  # nobody else will: the parent is gone
        if os.getpgrp() == os.getpid():  # a session leader: the group is ours alone
            os.killpg(os.getpgrp(), signal.SIGKILL)
        os.kill(os.getpid(), signal.SIGKILL)

    threading.Thread(target=watch, name="parent-watch", daemon=True).start()


def main() -> int:
    work = Path(sys.argv[1])
    watch_parent(work)
    force_cpu = sys.argv[2:] == ["cpu"]
    device = _prepare(force_cpu)
    (work / "ready.tmp").write_text(device)
    (work / "ready.tmp").replace(work / "ready")  # prestart.READY: the parent may now use it
    raw = sys.stdin.read()
    if not raw.strip():  # the parent went away without a request: nobody else will clean up
        shutil.rmtree(work, ignore_errors=True)
        return 0
    req = json.loads(raw)
    if bool(req.get("force_cpu")) != force_cpu:
        sys.exit(f"worker started for force_cpu={force_cpu}, request has {req.get('force_cpu')}")
    # Start-up is what the evaluation waited for: from the hand-over, not from this spare's start.
    t0 = max(T_START, float(req.get("handed_at", 0.0)))
    progress = Progress(work / "progress", t0)
    out = Path(req["verdict"])
    nonce = req.pop("nonce")
    result = compare(req, progress) if req.get("mode") == "compare" else evaluate(req, progress)
    progress("done")
    result.harness_s = time.monotonic() - t0
    result.phase_s = {k: round(v, 3) for k, v in progress.seconds.items()}
    data = result.to_json()
    data["nonce"] = nonce
    tmp = out.with_suffix(".tmp")
    tmp.write_text(json.dumps(data, indent=2))
    tmp.replace(out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
