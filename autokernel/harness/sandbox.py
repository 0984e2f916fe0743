"""Run one evaluation (or one interleaved comparison of two kernels) in a fresh subprocess
with a hard wall-clock limit.

The parent never imports candidate code: it reads kernel.py's syntax tree for the static guard
and KERNEL_TYPE, then hands the request to a worker in its own process group and kills the whole
group when the limit expires (a hung GPU kernel cannot be interrupted from Python; killing the
process is the only stop). Whatever happens to the worker, the caller gets a verdict.

The worker is usually pre-started (prestart.py): a fresh process that finished its imports while
the previous request ran. The limit starts at the hand-over, so a worker's start-up never counts
against the candidate; compare() uses and keeps the same spare, its request differs only in mode.
"""

from __future__ import annotations

import json
import os
import re
import secrets
import signal
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import torch

from autokernel.cache import cache_dir
from autokernel.harness import containment, prestart
from autokernel.harness.guards import check_source, literal_assignment
from autokernel.harness.interleave import ROLES, ROUNDS, Comparison
from autokernel.harness.verdict import Check, Status, Verdict
from autokernel.specs import SPECS, Size

DEFAULT_TIMEOUT_S = 300.0  # the candidate's share: import, five stages, benchmark
BASELINE_ALLOWANCE_S = 900.0  # extra, once per machine and size: torch.compile of baselines
POLL_S = 0.05
QUIET = "quiet"  # worker.await_quiet: the file that says no spare is starting any more
SECRET_ENV = re.compile(r"KEY|TOKEN|SECRET|PASSWORD|CREDENTIAL|AUTH", re.IGNORECASE)
REPO_ROOT = Path(__file__).resolve().parents[2]


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
    guards: bool = True  # False only to test the stages themselves on trusted code
    force_cpu: bool = False
    prestart: bool = True  # start the next request's worker while this one runs (prestart.py)


def worker_env() -> dict[str, str]:
    """The parent's environment minus anything that looks like a credential: API keys must never
    reach candidate code."""
    env = {k: v for k, v in os.environ.items() if not SECRET_ENV.search(k)}
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO_ROOT), env.get("PYTHONPATH")]))
    env["PYTHONUNBUFFERED"] = "1"
    if ships_no_bytecode(torch.__file__):
        # Every experiment starts a fresh worker, and without bytecode each one compiled
        # torch's sources again: a spare took ~10 s to start on the H200 image we use (3.5 s
        # with bytecode, measured on a CPU box). It is written once into our own cache, never
        # beside the user's files.
        env.pop("PYTHONDONTWRITEBYTECODE", None)
        env.setdefault("PYTHONPYCACHEPREFIX", str(cache_dir() / "pycache"))
    return env


def ships_no_bytecode(module_file: str) -> bool:
    """Whether a module was installed without its compiled bytecode (read-only or
    --no-compile images). Where it has it, a cache of our own would only be slower."""
    path = Path(module_file)
    pyc = path.parent / "__pycache__" / f"{path.stem}.{sys.implementation.cache_tag}.pyc"
    return not pyc.exists()


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
    kernel_type = literal_assignment(source, "KERNEL_TYPE")
    if kernel_type not in SPECS:
        msg = (f"KERNEL_TYPE = {kernel_type!r} is not a kernel type; set it to one of "
               + ", ".join(SPECS))  # fmt: skip
        return _early(path, Status.CRASH, "import", msg), ""
    if findings and opts.guards:
        msg = "; ".join(str(f) for f in findings[:10])
        return _early(path, Status.REJECTED, "static", msg, str(kernel_type), findings), ""
    return None, str(kernel_type)


def _early(path, status, stage, message, kernel_type="", findings=()) -> Verdict:
    return Verdict(
        status=status, kernel_type=kernel_type, file=str(path),
        message=f"{status.value} in {stage}: {message.splitlines()[0]}",
        failure=Check(stage, "", "", False, message), guards=[str(f) for f in findings],
    )  # fmt: skip


def evaluate(
    path: Path, opts: Options | None = None, on_phase: Callable[[str], None] | None = None
) -> Verdict:
    """Evaluate the kernel file and return its verdict; never raises for the candidate's faults.

    on_phase is called with each phase the worker enters (baselines, import, smoke, ...)."""
    opts = opts or Options()
    path = Path(path).resolve()
    t0 = time.perf_counter()
    early, kernel_type = _static(path, opts)
    if early:
        early.harness_s = time.perf_counter() - t0
        return early
    req = _request(opts, file=str(path), kernel_type=kernel_type, timing=opts.timing,
                   compile_baseline=opts.compile_baseline)  # fmt: skip
    out = _run_worker(req, opts, on_phase or (lambda p: None))
    verdict = _verdict(out, opts.timeout_s)
    verdict.sandbox = containment.kind()
    verdict.file = str(path)
    verdict.kernel_type = verdict.kernel_type or kernel_type
    verdict.seed = req["seed"]
    worker_s = verdict.harness_s  # from the hand-over: a spare's own start-up is not in it
    verdict.harness_s = time.perf_counter() - t0
    if worker_s:
        verdict.phase_s["process start and exit"] = round(verdict.harness_s - worker_s, 3)
    return verdict


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
    if out.data is not None:
        result = Comparison.from_json(out.data)
    else:
        result = Comparison(error=_verdict(out, opts.timeout_s).message)
    result.harness_s = time.perf_counter() - t0
    return result


def _request(opts: Options, **fields: object) -> dict:
    return {
        "seed": opts.seed if opts.seed is not None else secrets.randbelow(2**31),
        "quick": opts.quick, "dtype": opts.dtype, "extra_sizes": opts.extra_sizes,
        "guards": opts.guards, "force_cpu": opts.force_cpu, "nonce": secrets.token_hex(16),
        **fields,
    }  # fmt: skip


@dataclass
class _Outcome:
    """What came back from one worker run."""

    data: dict | None  # the worker's result JSON, its nonce checked; None when it gave none
    phase: str  # the phase it was last in; "" while still in start-up
    timed_out: bool = False
    returncode: int = 0
    stderr: str = ""


def _run_worker(req: dict, opts: Options, on_phase: Callable[[str], None]) -> _Outcome:
    """Run the request in the spare if it fits, else in a worker started now. A spare that
    exits before entering any phase never ran candidate code (OOM-killed while it waited, say):
    the request gets one more worker, so a lost spare never becomes the candidate's CRASH."""
    env = worker_env()
    for _ in range(2):
        worker, pre_started = prestart.take(opts.force_cpu, env)
        try:
            out = _watch(worker, req, opts, env, on_phase)
        except BaseException:  # Ctrl-C in the parent: leave no orphan holding the GPU
            prestart.discard()
            raise
        finally:
            worker.close()
        if not (pre_started and out.data is None and not out.timed_out and not out.phase):
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
) -> _Outcome:
    work, timeout_s = worker.work, opts.timeout_s
    result, progress = work / "verdict.json", work / "progress"
    if not worker.ready():
        on_phase("start-up")  # truthful: this evaluation waits for the worker's imports
    quiet = work / QUIET  # created once no spare is starting beside this worker's timing
    req = {
        **req, "progress": str(progress), "verdict": str(result), "quiet": str(quiet),
        "handed_at": time.monotonic(),
    }  # fmt: skip
    try:
        worker.hand_over(req)
    except OSError:
        pass  # it died already: seen below as an exit without a verdict
    start = time.monotonic()
    candidate_start: float | None = None
    last_phase = ""
    spare_due = opts.prestart  # the next request's spare, started beside this one when harmless
    timed = req.get("mode") == "compare" or req.get("timing", True)
    beside = False
    while worker.alive():
        if spare_due and worker.ready():  # not before: two start-ups would compete for the CPU
            # Under the interpreter, its imports would share the cores being timed (a copy of
            # softmax measured 2x slower than itself on two cores); on a GPU they use idle ones.
            if worker.device() == "cuda" or not timed:
                prestart.keep_warm(opts.force_cpu, env)
                beside = True
            spare_due = False  # else _run_worker starts it once this worker is done
        if not spare_due and not quiet.exists() and not _starting(beside):
            quiet.touch()
        time.sleep(POLL_S)
        if result.exists():
            break  # written atomically and final: don't wait for torch's slow teardown
        phase = _read(progress)
        if phase != last_phase:
            on_phase(phase)
            last_phase = phase
        now = time.monotonic()
        if candidate_start is None and phase not in ("", "baselines"):
            candidate_start = now
        over_candidate = candidate_start is not None and now - candidate_start > timeout_s
        over_all = now - start > timeout_s + BASELINE_ALLOWANCE_S
        if over_candidate or over_all:
            worker.kill()
            return _Outcome(None, phase or "start-up", True, stderr=_tail(work / "stderr"))
    worker.kill()  # reap anything the candidate left running in the group
    try:
        data = json.loads(result.read_text())
    except (OSError, ValueError):
        data = None
    if data is not None and data.pop("nonce", None) != req["nonce"]:
        data = None
    phase = _read(progress)  # "": it never got past start-up
    code = containment.exit_status(worker.proc.returncode or 0, worker.sandbox)
    return _Outcome(data, phase, False, code, _tail(work / "stderr"))


def _starting(beside: bool) -> bool:
    """Whether a spare started beside the current worker is still in its start-up. Timing waits
    for it: on the H200 a 38 us narrow-row kernel read 53-66 us while a process started up
    (imports, CUDA context) beside it."""
    spare = prestart.spare() if beside else None
    return spare is not None and spare.alive() and not spare.ready()


def _verdict(out: _Outcome, timeout_s: float) -> Verdict:
    if out.timed_out:
        where = out.phase
        return Verdict(
            status=Status.TIMEOUT, message=f"TIMEOUT in {where}: no verdict after "
            f"{timeout_s:g} s; the process group was killed",
            failure=Check(where, "", "", False, f"killed after {timeout_s:g} s in {where}"),
            stderr_tail=out.stderr,
        )  # fmt: skip
    if out.data is not None:
        verdict = Verdict.from_json(out.data)
        verdict.stderr_tail = out.stderr if verdict.status is not Status.PASS else ""
        return verdict
    where = out.phase or "start-up"
    if out.returncode < 0:
        name = signal.Signals(-out.returncode).name
        what = f"killed by {name}" + (" (segmentation fault)" if name == "SIGSEGV" else "")
    else:
        what = f"exited with code {out.returncode} without a verdict"
    if "illegal memory access" in out.stderr:
        what += ": illegal memory access"
    return Verdict(
        status=Status.CRASH, message=f"CRASH in {where}: worker {what}",
        failure=Check(where, "", "", False, f"worker {what}\n{out.stderr[-2000:]}"),
        stderr_tail=out.stderr,
    )  # fmt: skip


def _read(path: Path) -> str:
    try:
        return path.read_text().strip()
    except OSError:
        return ""


def _tail(path: Path, limit: int = 4000) -> str:
    try:
        return path.read_text(errors="replace")[-limit:]
    except OSError:
        return ""
