"""Run one evaluation (or one interleaved comparison of two kernels) in a fresh subprocess
with a hard wall-clock limit.

The parent never imports candidate code: it reads kernel.py's syntax tree for the static guard
and KERNEL_TYPE, then hands the request to a worker in its own process group and kills the whole
group when the limit expires (a hung GPU kernel cannot be interrupted from Python; killing the
process is the only stop). Whatever happens to the worker, the caller gets a verdict, and this
process decides it (judge.py): the worker only computes outputs and runs the timed calls.

The worker is usually pre-started (prestart.py): a fresh process that finished its imports while
the previous request ran. The limit starts at the hand-over, so a worker's start-up never counts
against the candidate; compare() uses and keeps the same spare, its request differs only in mode.
What a worker run came to, when the judge gave no verdict, is outcome.py's; the worker's
environment is worker_env.py's.
"""

from __future__ import annotations

import os
import secrets
import subprocess
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import torch

from autokernel.harness import containment, judge, prestart, trusted_baselines
from autokernel.harness.channel import ChannelError, ChannelTimeout, read_untrusted
from autokernel.harness.cuda_check import check_cuda_source
from autokernel.harness.guards import UnjudgeableSource, check_source, literal_assignment
from autokernel.harness.interleave import ROLES, ROUNDS, Comparison
from autokernel.harness.outcome import Outcome, verdict_of
from autokernel.harness.untrusted_text import printable, printable_json
from autokernel.harness.verdict import STAGES, Check, StageResult, Status, Verdict
from autokernel.harness.worker_env import worker_env
from autokernel.judged import sha256_of
from autokernel.specs import GENERIC, KERNEL_TYPES, Size

DEFAULT_TIMEOUT_S = 300.0  # the candidate's share: import, five stages, benchmark
BASELINE_ALLOWANCE_S = 900.0  # extra, once per machine and size: torch.compile of baselines
EXIT_WAIT_S = 2.0  # after its channel closed, how long a worker gets to exit by itself
QUIET = "quiet"  # worker.await_quiet: the file that says no spare is starting any more
BACKENDS = ("triton", "cuda")
CUDA_SOURCE = "CUDA_SOURCE"  # the module-level string literal a BACKEND = "cuda" kernel builds
NO_GPU = ('BACKEND = "cuda" needs an NVIDIA GPU and this machine has none: run it on a GPU '
          "machine, or use a Triton kernel")  # fmt: skip


class KernelFileError(Exception):
    """The file to evaluate cannot be read at all (the user's mistake, not a verdict)."""


@dataclass
class Options:
    timeout_s: float = DEFAULT_TIMEOUT_S
    seed: int | None = None
    quick: bool = False
    timing: bool = True
    compile_baseline: bool = True
    dtype: str | None = None  # benchmark dtype; default: the spec's (bf16 on GPU)
    extra_sizes: list[Size] = field(default_factory=list)
    region: dict | None = None  # a generic target's description (plan.yaml): its reference
    guards: bool = True  # False only to test the stages themselves on trusted code
    force_cpu: bool = False
    prestart: bool = True  # start the next request's worker while this one runs (prestart.py)


def _static(path: Path, opts: Options) -> tuple[Verdict | None, str]:
    try:
        source = path.read_text()
    except FileNotFoundError:
        raise KernelFileError(
            f"{path}: no such file. Pass a kernel file, e.g. kernels/softmax.py"
        ) from None
    except (OSError, UnicodeDecodeError) as exc:
        raise KernelFileError(f"{path}: cannot read: {exc}") from None
    try:
        findings = check_source(source)
    except SyntaxError as exc:
        msg = f"SyntaxError: {exc.msg} (line {exc.lineno}, column {exc.offset})"
        return _early(path, Status.CRASH, "import", msg), ""
    except UnjudgeableSource as exc:  # nesting the parser cannot take: refused, not a crash
        return _early(path, Status.REJECTED, "static", str(exc)), ""
    kernel_type = literal_assignment(source, "KERNEL_TYPE")
    if kernel_type not in KERNEL_TYPES:
        msg = (f"KERNEL_TYPE = {kernel_type!r} is not a kernel type; set it to one of "
               + ", ".join(KERNEL_TYPES))  # fmt: skip
        return _early(path, Status.CRASH, "import", msg), ""
    if kernel_type == GENERIC and not opts.region:
        msg = ("a generic kernel is judged against its target's region: run it through "
               "`autokernel run` with a plan from `autokernel profile`")  # fmt: skip
        return _early(path, Status.CRASH, "import", msg, str(kernel_type)), ""
    if findings and opts.guards:
        msg = "; ".join(str(f) for f in findings[:10])
        return _early(path, Status.REJECTED, "static", msg, str(kernel_type), findings), ""
    early = _backend(path, source, opts, str(kernel_type))
    return early, "" if early else str(kernel_type)


def _declared_backend(path: Path) -> str:
    """The file's BACKEND literal, "triton" when it names none (read for the verdict)."""
    try:
        value = literal_assignment(path.read_text(), "BACKEND")
    except (OSError, UnicodeDecodeError):
        return ""
    return value if isinstance(value, str) and value in BACKENDS else "triton"


def _backend(path: Path, source: str, opts: Options, kernel_type: str) -> Verdict | None:
    """The BACKEND's own static checks: for "cuda", CUDA_SOURCE is a string literal that passes
    the C++ guard, and this machine has a GPU to build it for."""
    backend = literal_assignment(source, "BACKEND")
    if backend in (None, "triton"):
        return None
    if backend not in BACKENDS:
        msg = f"BACKEND = {backend!r}: use one of {', '.join(map(repr, BACKENDS))}"
        return _early(path, Status.CRASH, "import", msg, kernel_type)
    cuda_source = literal_assignment(source, CUDA_SOURCE)
    if not isinstance(cuda_source, str):
        msg = (f'BACKEND = "cuda" needs {CUDA_SOURCE} = a string literal at module level '
               "(the C++ guard reads it before anything runs)")  # fmt: skip
        return _early(path, Status.REJECTED, "static", msg, kernel_type)
    findings = check_cuda_source(cuda_source)
    if findings and opts.guards:
        shown = [f"{CUDA_SOURCE} {f}" for f in findings]
        msg = "; ".join(shown[:10])
        return _early(path, Status.REJECTED, "static", msg, kernel_type, shown)
    if opts.force_cpu or not torch.cuda.is_available():
        return _early(path, Status.FAIL, "smoke", NO_GPU, kernel_type)
    return None


def _early(path, status, stage, message, kernel_type="", findings=()) -> Verdict:
    verdict = Verdict(
        status=status, kernel_type=kernel_type, file=str(path),
        message=f"{status.value} in {stage}: {message.splitlines()[0]}",
        failure=Check(stage, "", "", False, message), guards=[str(f) for f in findings],
    )  # fmt: skip
    if stage == "smoke":  # a stage of the five failed before it ran: the rest never start
        verdict.stages = [StageResult(stage, "FAIL")] + [
            StageResult(s, "SKIPPED") for s in STAGES[1:]
        ]
    return verdict


def evaluate(
    path: Path, opts: Options | None = None, on_phase: Callable[[str], None] | None = None
) -> Verdict:
    """Evaluate the kernel file and return its verdict; never raises for the candidate's faults.

    on_phase is called with each phase the worker enters (baselines, import, smoke, ...)."""
    opts = opts or Options()
    path = Path(path).resolve()
    t0 = time.perf_counter()
    digest = sha256_of(path)  # before the candidate runs: what is hashed is what was judged
    early, kernel_type = _static(path, opts)
    backend = _declared_backend(path)
    if early:
        early.harness_s, early.sha256, early.backend = time.perf_counter() - t0, digest, backend
        return early
    req = _request(opts, file=str(path), kernel_type=kernel_type, timing=opts.timing,
                   compile_baseline=opts.compile_baseline)  # fmt: skip
    on_phase = on_phase or (lambda p: None)
    trusted = trusted_baselines.prepared(req, worker_env(), BASELINE_ALLOWANCE_S, on_phase)
    out = _run_worker(req, opts, on_phase, trusted)
    verdict = verdict_of(out, opts.timeout_s)
    verdict.sandbox = containment.kind()
    if out.cap_note:  # said as the sandbox's absence is: the verdict holds, with less cover
        verdict.guards.append(out.cap_note)
    verdict.backend = backend
    verdict.file, verdict.sha256 = str(path), digest
    verdict.kernel_type = verdict.kernel_type or kernel_type
    verdict.seed = req["seed"]
    worker_s = verdict.harness_s  # from the hand-over: a spare's own start-up is not in it
    verdict.harness_s = time.perf_counter() - t0
    if worker_s:
        verdict.phase_s["process start and exit"] = round(verdict.harness_s - worker_s, 3)
    return Verdict.from_json(printable_json(verdict.to_json()))  # the candidate's words


def compare(
    best: Path,
    candidate: Path,
    opts: Options | None = None,
    rounds: int = ROUNDS,
    on_phase: Callable[[str], None] | None = None,
) -> Comparison:
    """Time two kernel files that both passed, interleaved in one worker, at the benchmark sizes
    plus opts.extra_sizes. Never raises for the kernels' faults: a wrong output, crash or
    timeout comes back as Comparison.error. KernelFileError when a file cannot be read."""
    opts = opts or Options()
    t0 = time.perf_counter()
    paths = [Path(best).resolve(), Path(candidate).resolve()]
    kinds = []
    for role, path in zip(ROLES, paths, strict=True):
        early, kind = _static(path, opts)
        if early:
            error = f"{role} kernel: {early.message}"
            return Comparison(error=error, harness_s=time.perf_counter() - t0)
        kinds.append(kind)
    if kinds[0] != kinds[1]:
        return Comparison(error=f"kernel types differ: best {kinds[0]}, candidate {kinds[1]}")
    req = _request(opts, mode="compare", files=[str(p) for p in paths], kernel_type=kinds[0],
                   rounds=rounds)  # fmt: skip
    out = _run_worker(req, opts, on_phase or (lambda p: None))
    if isinstance(out.result, Comparison):
        result = out.result
    else:
        result = Comparison(error=verdict_of(out, opts.timeout_s).message)
    result.error = printable(result.error) if result.error else result.error  # their words
    result.harness_s = time.perf_counter() - t0
    return result


def _request(opts: Options, **fields: object) -> dict:
    return {
        "seed": opts.seed if opts.seed is not None else secrets.randbelow(2**31),
        "quick": opts.quick, "dtype": opts.dtype, "extra_sizes": opts.extra_sizes,
        "guards": opts.guards, "force_cpu": opts.force_cpu, "region": opts.region,
        **fields,
    }  # fmt: skip


def _run_worker(
    req: dict, opts: Options, on_phase: Callable[[str], None], trusted: dict | None = None
) -> Outcome:
    """Run the request in the spare if it fits, else in a worker started now. A spare that
    exits before answering its first request never ran candidate code (OOM-killed while it
    waited, say): the request gets one more worker, so a lost spare never becomes the
    candidate's CRASH. trusted: the baseline worker's reply (trusted_baselines.py)."""
    env = worker_env()
    for _ in range(2):
        worker, pre_started = prestart.take(opts.force_cpu, env)
        try:
            out = _watch(worker, req, opts, env, on_phase, trusted or {})
        except BaseException:  # Ctrl-C in the parent: leave no orphan holding the GPU
            prestart.discard()
            raise
        finally:
            worker.close()
        out.cap_note = worker.cap_note
        if not (pre_started and out.result is None and not out.timed_out and not out.phase):
            break
    if opts.prestart:
        prestart.keep_warm(opts.force_cpu, env)
    return out


def _watch(
    worker: prestart.Worker,
    req: dict,
    opts: Options,
    env: dict[str, str],
    on_phase: Callable[[str], None],
    trusted: dict,
) -> Outcome:
    """Hand the request over and judge the worker's replies (judge.py) under the time limits."""
    work, timeout_s = worker.work, opts.timeout_s
    quiet = work / QUIET  # created once no spare is starting beside this worker's timing
    req = {**req, "quiet": str(quiet)}
    spare_due = opts.prestart  # the next request's spare, started beside this one when harmless
    timed = req.get("mode") == "compare" or req.get("timing", True)
    beside = False

    def tick() -> None:
        nonlocal spare_due, beside
        if spare_due and worker.ready():  # not before: two start-ups would compete for the CPU
            # Under the interpreter, its imports would share the cores being timed (a copy of
            # softmax measured 2x slower than itself on two cores); on a GPU they use idle ones.
            if worker.device() == "cuda" or not timed:
                prestart.keep_warm(opts.force_cpu, env)
                beside = True
            spare_due = False  # else _run_worker starts it once this worker is done
        if not spare_due and not os.path.lexists(quiet) and not _starting(beside):
            _create(quiet)

    link = judge.Link(worker, (timeout_s, timeout_s + BASELINE_ALLOWANCE_S), on_phase, tick)
    try:
        if req.get("mode") == "compare":
            result: Verdict | Comparison = judge.compare(link, req)
        else:
            result = judge.evaluate(link, req, trusted)
    except ChannelTimeout:
        worker.kill()
        return Outcome(None, link.phase, True, stderr=_tail(work / "stderr"))
    except ChannelError as exc:
        phase = link.phase if link.replies else ""
        try:
            worker.proc.wait(timeout=EXIT_WAIT_S)
            unreadable = ""
        except subprocess.TimeoutExpired:
            unreadable = str(exc)  # alive, yet its reply could not be read
        worker.kill()
        code = containment.exit_status(worker.proc.returncode or 0, worker.sandbox)
        return Outcome(None, phase, False, code, _tail(work / "stderr"), unreadable)
    except torch.cuda.OutOfMemoryError as exc:
        # The GPU has no OOM killer to pick the worker: a candidate that holds the device's
        # memory makes the judge's own allocations (inputs, references, output copies) fail,
        # and that error ended the night. Killing the worker frees it for the next evaluation.
        worker.kill()
        torch.cuda.empty_cache()
        first = (str(exc).splitlines() or ["out of memory"])[0][:300]
        return Outcome(None, link.phase, stderr=_tail(work / "stderr"), starved=first)
    worker.kill()  # reap anything the candidate left running in the group
    result.harness_s = time.monotonic() - link.start
    result.phase_s = link.phase_s()
    code = containment.exit_status(worker.proc.returncode or 0, worker.sandbox)
    return Outcome(result, link.phase, False, code, _tail(work / "stderr"))


def _create(path: Path) -> None:
    """Create an empty file in the worker's directory without following a link planted there
    (touch() would create the link's target, anywhere on the host)."""
    try:
        os.close(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_NOFOLLOW | os.O_NONBLOCK, 0o600))
    except OSError:
        pass  # something is there already: the worker sees it


def _starting(beside: bool) -> bool:
    """Whether a spare started beside the current worker is still in its start-up. Timing waits
    for it: on the H200 a 38 us narrow-row kernel read 53-66 us while a process started up
    (imports, CUDA context) beside it."""
    spare = prestart.spare() if beside else None
    return spare is not None and spare.alive() and not spare.ready()


def _read(path: Path) -> str:
    try:
        return path.read_text().strip()
    except OSError:
        return ""


def _tail(path: Path, limit: int = 4000) -> str:
    """The file's last `limit` bytes: the candidate writes this file, and a worker that printed
    for its whole time limit leaves gigabytes there (read whole, they would end the night). A
    link or FIFO in its place is not read (channel.read_untrusted)."""
    return read_untrusted(path, limit, tail=True).decode(errors="replace")
