"""The evaluation worker: the only process that imports candidate code, and one that judges
nothing.

Started by the sandbox (`python -m autokernel.harness.worker WORK_DIR cpu|auto`), possibly
long before it is needed: it first imports everything that is not candidate-specific, creates
WORK_DIR/ready, and only then reads its first request from stdin (see prestart.py). It answers
that one with the baselines and ceilings, measured before any candidate code runs, then serves
the judge's requests one at a time (serve.py: import, call, time), each answered by one JSON
line on its private channel (channel.py). The judge (judge.py, in the parent) decides every
verdict from copies of the outputs; whatever this process says about itself is a claim.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import sys
import threading
import time
from pathlib import Path
from typing import Any

from autokernel.atomic import write_atomic
from autokernel.harness import task_cap


class Progress:
    """Writes the current phase to a file for the parent, which reads it while it waits (so a
    timeout can say where the worker hung, and a phase the worker enters on its own, such as
    waiting for the spare's start-up, shows in the live view)."""

    def __init__(self, path: Path) -> None:
        self.path, self.phase = path, ""

    def __call__(self, phase: str) -> None:
        if phase != self.phase:
            self.phase = phase
            self.path.write_text(phase)


def _install_stream_guard(torch, active: list[bool]) -> list[str]:
    """Record any attempt to create or switch CUDA streams while active[0] is true (during the
    judged calls; the static guard forbids naming streams, this catches a path around it).
    Work hidden on a side stream while timed shows in the judge's wall clock instead."""
    seen: list[str] = []
    for name in ("Stream", "set_stream", "stream", "ExternalStream"):
        original = getattr(torch.cuda, name, None)
        if original is None:
            continue

        def wrapped(*a, __name=name, __orig=original, **k):
            if active[0]:
                seen.append(f"torch.cuda.{__name}")
            return __orig(*a, **k)

        setattr(torch.cuda, name, wrapped)
    return seen


def _peaks(device, dtype) -> dict[str, float | None]:
    if device.type != "cuda":
        return {"gbs": None, "tflops": None}
    from autokernel import gpu

    info = gpu.detect()
    ceilings = gpu.load_or_measure()
    return {
        "gbs": gpu.peak_bandwidth_gbs(info, ceilings),
        "tflops": gpu.peak_tflops(info, ceilings, dtype),
        "datasheet_gbs": gpu.peak_bandwidth_gbs(info, None),
        "datasheet_tflops": gpu.peak_tflops(info, None, dtype),
    }


def _setting(req: dict[str, Any]):
    """Device, spec and benchmark dtype of the request."""
    import torch

    from autokernel.specs import parse_dtype, resolve

    on_gpu = torch.cuda.is_available() and not req.get("force_cpu")
    if not on_gpu:
        os.environ["TRITON_INTERPRET"] = "1"  # before triton or the candidate is imported
    spec = resolve(req["kernel_type"], req.get("region"))
    dtype = parse_dtype(req["dtype"]) if req.get("dtype") else (
        spec.bench_dtype_gpu if on_gpu else spec.bench_dtype_cpu
    )  # fmt: skip
    return torch.device("cuda" if on_gpu else "cpu"), spec, dtype


BASELINES = "baselines"  # the request mode of the trusted baseline worker (trusted_baselines)


def prepare(req: dict[str, Any], progress: Progress) -> dict[str, Any]:
    """The first reply: the device, and for the trusted baseline worker alone the baselines of
    the benchmark sizes and the machine's ceilings. A candidate's worker measures none of them:
    its caches are its own and what it could say about a baseline would be a claim, so the
    judge takes them from the baseline worker, which never imports candidate code."""
    from autokernel.harness import baselines, warm_starter
    from autokernel.harness.benchmark import bench_sizes

    device, spec, dtype = _setting(req)
    on_gpu = device.type == "cuda"
    reply: dict[str, Any] = {"device": device.type, "device_name": baselines.device_name(device)}
    if req.get("mode") != BASELINES:
        return reply
    progress("baselines")
    quick, extra = bool(req.get("quick")), tuple(req.get("extra_sizes") or ())
    sizes = bench_sizes(spec, on_gpu, quick, extra)
    with_compile = bool(req.get("compile_baseline", True))
    notes = baselines.ensure(spec, sizes, dtype, device, int(req["seed"]), with_compile)
    reply["notes"] = [f"baseline {k} unavailable: {v}" for k, v in notes.items()]
    reply["baselines"] = {
        spec.label(s): {
            kind: baselines.lookup(spec, s, dtype, device, kind)
            for kind in (("eager", "compile") if with_compile else ("eager",))
        }
        for s in sizes
    }
    reply["peaks"] = _peaks(device, dtype)
    if on_gpu:  # the interpreter compiles nothing (warm_starter.py)
        progress("compiling the starter")
    reply["warm"] = warm_starter.warm(spec, device, dtype, int(req["seed"]), extra, quick)
    return reply


def serve(req: dict[str, Any], work: Path, channel, requests, progress: Progress) -> None:
    """Answer the judge's requests until it says finish or closes the channel."""
    import torch

    from autokernel.harness import retention
    from autokernel.harness.channel import send
    from autokernel.harness.compiled import spilled_registers
    from autokernel.harness.serve import Session, cuda_builds

    device, spec, _ = _setting(req)
    send(channel, {**prepare(req, progress), "seq": req.get("seq")})
    active = [False]
    streams = _install_stream_guard(torch, active) if device.type == "cuda" else []
    session = Session(spec, device, int(req["seed"]), work, bool(req.get("guards", True)))
    for line in requests:
        msg = json.loads(line)
        op = msg.get("op")
        if msg.get("phase"):
            progress(msg["phase"])
        if op == "import" and req.get("mode") == BASELINES:
            reply = {"status": "CRASH", "error": "the baseline worker imports no kernel"}
        elif op == "import":
            if device.type == "cuda":
                torch.cuda.reset_peak_memory_stats()
            reply = session.import_files(msg["files"], msg["names"])
        elif op == "call":
            active[0] = True
            reply = session.call(msg)
            active[0] = False
        elif op == "time":
            reply = session.time(msg)
        elif op == "refill":
            session.refill(tuple(msg["key"]))
            reply = {"ok": True}
        elif op == "batch":
            reply = session.batch(msg)
        elif op == "timed_output":
            reply = session.timed_output(int(msg["index"]), int(msg.get("role", 0)))
        elif op == "output":
            reply = session.output()
        elif op == "rounds":
            reply = session.rounds(msg, progress)
        elif op == "quiet":
            await_quiet(req, progress)
            reply = {"ok": True}
        elif op == "held":  # tensor bytes kept between calls (the determinism stage's)
            reply = {"held_bytes": retention.held_bytes(session.own_tensors())}
        elif op == "streams":
            reply = {"streams": sorted(set(streams))}
        elif op == "finish":
            spilled = [spilled_registers(m) for m in session.modules]
            known = [n for n in spilled if n is not None]
            peak = int(torch.cuda.max_memory_allocated()) if device.type == "cuda" else 0
            reply = {"streams": sorted(set(streams)), "peak_mem_bytes": peak,
                     "spilled_registers": max(known) if known else None,
                     "builds": cuda_builds()}  # fmt: skip
        else:
            reply = {"error": f"unknown request {op!r}"}
        send(channel, {**reply, "seq": msg.get("seq")})
        if op == "finish":
            return


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
    if device == "cpu":  # before any kernel file runs: its top level may launch
        from autokernel.harness import interpreter_bounds

        interpreter_bounds.install()

    import autokernel.gpu
    import autokernel.harness.benchmark
    import autokernel.harness.interleave
    import autokernel.harness.serve
    import autokernel.specs  # noqa: F401
    from autokernel.harness.guards import TorchOpMonitor

    # Lazy first-use costs that every evaluation paid in its first stage, none of them the
    # candidate's (on the H200 a warm smoke stage took 3.5-4.7 s with every kernel cached;
    # profiled, it was all this): the first dispatch through a TorchDispatchMode (no longer
    # the import of torch._dynamo it was: TorchOpMonitor._should_skip_dynamo), and Triton's
    # first cache lookup hashes libtriton (0.5 s).
    with TorchOpMonitor():
        torch.empty(1, device=device)
    if device == "cpu":
        return device  # the interpreter compiles nothing: no cache key, no target
    from autokernel.harness.worker_env import install_triton_key

    install_triton_key()
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


def _private_channel(work: Path):
    """The channel to the judge: a copy of the stdout pipe the parent gave us. Fd 1 itself is
    pointed at a file, so a candidate's prints never mix with the replies."""
    channel = os.fdopen(os.dup(1), "wb")
    fd = os.open(work / "stdout", os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
    os.dup2(fd, 1)
    os.close(fd)
    return channel


MAX_FILE_BYTES = 4 << 30  # twice the largest output file a benchmark size writes (2.1 GB)


def limit_self() -> None:
    """Make this process the one to lose when it takes too much, before any candidate runs.

    Why: a candidate that fills memory would otherwise let the kernel's OOM killer choose, and
    it may choose the parent, which holds the night; a candidate printing or writing for its
    whole time limit would fill the disk that results.tsv is on. An OOM score of 1000 marks this
    process first; RLIMIT_FSIZE (soft and hard) caps every file it writes, and RLIMIT_NPROC the
    tasks it and its descendants hold. None can be undone without CAP_SYS_RESOURCE, which a
    worker never has."""
    import resource

    try:
        with open("/proc/self/oom_score_adj", "w") as f:
            f.write("1000")
    except OSError:  # not Linux, or /proc not mounted: the time limit still applies
        pass
    _, hard = resource.getrlimit(resource.RLIMIT_FSIZE)
    cap = MAX_FILE_BYTES if hard == resource.RLIM_INFINITY else min(hard, MAX_FILE_BYTES)
    resource.setrlimit(resource.RLIMIT_FSIZE, (cap, cap))
    # Processes and threads: RLIMIT_NPROC inside the sandbox's user namespace, where the
    # parent chose it (task_cap.py says where it holds and what covers the rest).
    task_cap.limit_tasks(task_cap.cap_from_env())


def main() -> int:
    work = Path(sys.argv[1])
    limit_self()
    watch_parent(work)
    channel = _private_channel(work)
    force_cpu = sys.argv[2:] == ["cpu"]
    device = _prepare(force_cpu)
    write_atomic(work / "ready", device)  # prestart.READY: the parent may now use it
    requests = sys.stdin.buffer
    raw = requests.readline()
    if not raw.strip():  # the parent went away without a request: nobody else will clean up
        shutil.rmtree(work, ignore_errors=True)
        return 0
    req = json.loads(raw)
    if bool(req.get("force_cpu")) != force_cpu:
        sys.exit(f"worker started for force_cpu={force_cpu}, request has {req.get('force_cpu')}")
    serve(req, work, channel, requests, Progress(work / "progress"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
