"""Run one evaluation (or one interleaved comparison of two kernels) in a fresh subprocess
with a hard wall-clock limit.

The parent never imports candidate code: it reads kernel.py's syntax tree for the static guard
and KERNEL_TYPE, then starts the worker in a new process group and kills the whole group when
the limit expires (a hung GPU kernel cannot be interrupted from Python; killing the process is
the only stop). Whatever happens to the worker, the caller gets a verdict.
"""

from __future__ import annotations

import json
import os
import re
import secrets
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from autokernel.harness.guards import check_source, literal_assignment
from autokernel.harness.interleave import ROLES, ROUNDS, Comparison
from autokernel.harness.verdict import Check, Status, Verdict
from autokernel.specs import SPECS, Size

DEFAULT_TIMEOUT_S = 300.0  # the candidate's share: import, five stages, benchmark
BASELINE_ALLOWANCE_S = 900.0  # extra, once per machine and size: torch.compile of baselines
POLL_S = 0.05
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


def worker_env() -> dict[str, str]:
    """The parent's environment minus anything that looks like a credential: API keys must never
    reach candidate code."""
    env = {k: v for k, v in os.environ.items() if not SECRET_ENV.search(k)}
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO_ROOT), env.get("PYTHONPATH")]))
    env["PYTHONUNBUFFERED"] = "1"
    return env


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


def _kill_group(proc: subprocess.Popen) -> None:
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    proc.wait()


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
    with tempfile.TemporaryDirectory(prefix="autokernel-eval-") as tmp:
        work = Path(tmp)
        req = _request(work, opts, file=str(path), kernel_type=kernel_type,
                       timing=opts.timing, compile_baseline=opts.compile_baseline)  # fmt: skip
        out = _run_worker(req, work, opts.timeout_s, on_phase or (lambda p: None))
        verdict = _verdict(out, opts.timeout_s)
        verdict.file = str(path)
        verdict.kernel_type = verdict.kernel_type or kernel_type
        verdict.seed = req["seed"]
        worker_s = verdict.harness_s
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
    with tempfile.TemporaryDirectory(prefix="autokernel-compare-") as tmp:
        work = Path(tmp)
        req = _request(work, opts, mode="compare", files=[str(p) for p in paths],
                       kernel_type=kinds[0], rounds=rounds)  # fmt: skip
        out = _run_worker(req, work, opts.timeout_s, on_phase or (lambda p: None))
    if out.data is not None:
        result = Comparison.from_json(out.data)
    else:
        result = Comparison(error=_verdict(out, opts.timeout_s).message)
    result.harness_s = time.perf_counter() - t0
    return result


def _request(work: Path, opts: Options, **fields: object) -> dict:
    return {
        "seed": opts.seed if opts.seed is not None else secrets.randbelow(2**31),
        "quick": opts.quick, "dtype": opts.dtype, "extra_sizes": opts.extra_sizes,
        "guards": opts.guards, "force_cpu": opts.force_cpu, "nonce": secrets.token_hex(16),
        "progress": str(work / "progress"), "verdict": str(work / "verdict.json"), **fields,
    }  # fmt: skip


@dataclass
class _Outcome:
    """What came back from one worker run."""

    data: dict | None  # the worker's result JSON, its nonce checked; None when it gave none
    phase: str  # the phase it was last in
    timed_out: bool = False
    returncode: int = 0
    stderr: str = ""


def _run_worker(
    req: dict, work: Path, timeout_s: float, on_phase: Callable[[str], None]
) -> _Outcome:
    result = Path(req["verdict"])
    stdout = (work / "stdout").open("w")
    stderr = (work / "stderr").open("w")
    proc = subprocess.Popen(
        [sys.executable, "-m", "autokernel.harness.worker", str(work / "progress")],
        stdin=subprocess.PIPE, stdout=stdout, stderr=stderr, env=worker_env(),
        cwd=work, start_new_session=True,
    )  # fmt: skip
    progress = work / "progress"
    try:
        assert proc.stdin is not None
        proc.stdin.write(json.dumps(req).encode())
        proc.stdin.close()
        start = time.monotonic()
        candidate_start: float | None = None
        last_phase = ""
        while proc.poll() is None:
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
                _kill_group(proc)
                return _Outcome(None, phase or "start-up", True, stderr=_tail(work / "stderr"))
    except BaseException:  # Ctrl-C in the parent: leave no orphan holding the GPU
        _kill_group(proc)
        raise
    finally:
        stdout.close()
        stderr.close()
    _kill_group(proc)  # reap anything the candidate left running in the group
    try:
        data = json.loads(result.read_text())
    except (OSError, ValueError):
        data = None
    if data is not None and data.pop("nonce", None) != req["nonce"]:
        data = None
    phase = _read(progress) or "start-up"
    return _Outcome(data, phase, False, proc.returncode or 0, _tail(work / "stderr"))


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
    if out.returncode < 0:
        name = signal.Signals(-out.returncode).name
        what = f"killed by {name}" + (" (segmentation fault)" if name == "SIGSEGV" else "")
    else:
        what = f"exited with code {out.returncode} without a verdict"
    if "illegal memory access" in out.stderr:
        what += ": illegal memory access"
    return Verdict(
        status=Status.CRASH, message=f"CRASH in {out.phase}: worker {what}",
        failure=Check(out.phase, "", "", False, f"worker {what}\n{out.stderr[-2000:]}"),
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
