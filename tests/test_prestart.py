"""Pre-started workers: a warm spare gives the verdict a cold worker gives, in a fresh process
each time, in less time; a dead, stale or mismatched spare is replaced; none outlives its parent;
secrets never reach one."""

from __future__ import annotations

import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

import pytest

from autokernel.harness import containment, prestart
from autokernel.harness.sandbox import Options, evaluate, worker_env
from autokernel.harness.verdict import Status

ROOT = Path(__file__).parents[1]
STARTER = ROOT / "kernels" / "softmax.py"
FAULTS = ROOT / "tests" / "faults"
READY_WAIT_S = 60.0  # torch + triton imports on a busy two-core machine
TIMEOUT_SLACK_S = 10.0  # a warm worker's limit starts at the hand-over: no start-up in it
SAVED_SHARE = 0.3  # of the cold start-up phase, at least, a ready spare must save
# The worker's own directory names it: a pid inside the sandbox's PID namespace would not.
PID_KERNEL = "KERNEL_TYPE = 'reduce'\nimport os\nraise RuntimeError(f'worker dir {os.getcwd()}')\n"
FAST = dict(quick=True, timing=False)


@pytest.fixture(autouse=True)
def _no_spare():
    prestart.discard()
    yield
    prestart.discard()


def ready_spare(force_cpu: bool = False) -> prestart.Worker:
    prestart.keep_warm(force_cpu, worker_env())
    spare = prestart.spare()
    assert spare is not None
    deadline = time.monotonic() + READY_WAIT_S
    while not spare.ready():
        assert spare.alive() and time.monotonic() < deadline, "the spare never got ready"
        time.sleep(0.05)
    return spare


def alive(pid: int) -> bool:
    """Running (a zombie that nobody reaped yet counts as gone)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] != "Z"


def worker_pid(path: Path, opts: Options) -> str:
    """Evaluate the kernel that reports its worker's directory and return it."""
    v = evaluate(path, opts)
    match = re.search(r"worker dir (\S+)", v.message)
    assert v.status is Status.CRASH and v.failure.stage == "import" and match, v.message
    return match.group(1)


@pytest.fixture
def pid_kernel(tmp_path) -> Path:
    path = tmp_path / "kernel.py"
    path.write_text(PID_KERNEL)
    return path


def timed(path: Path, opts: Options):
    t0 = time.perf_counter()
    v = evaluate(path, opts)
    return v, time.perf_counter() - t0


@pytest.mark.slow
def test_a_ready_spare_gives_the_cold_verdict_and_saves_the_start_up():
    opts = Options(prestart=False, **FAST)
    cold, cold_s = timed(STARTER, opts)
    assert prestart.spare() is None  # prestart=False: nothing ran beside the cold evaluation
    ready_spare()
    warm, warm_s = timed(STARTER, opts)
    start_up, waited = cold.phase_s["start-up"], warm.phase_s["start-up"]
    print(f"\ncold {cold_s:.2f} s (start-up {start_up:.2f} s), warm {warm_s:.2f} s "
          f"(start-up {waited:.2f} s): saved {cold_s - warm_s:.2f} s")  # fmt: skip
    assert cold.status is warm.status is Status.PASS, (cold.message, warm.message)
    assert [(s.name, s.status) for s in cold.stages] == [(s.name, s.status) for s in warm.stages]
    assert cold_s - warm_s >= SAVED_SHARE * start_up
    # truthful: the warm evaluation reports only the start-up it waited for
    assert waited < SAVED_SHARE * start_up
    assert warm.harness_s == pytest.approx(warm_s, abs=0.5)


@pytest.mark.slow
@pytest.mark.parametrize(
    "fault, status",
    [("os_exit_guards_off.py", Status.CRASH), ("hang_python_loop.py", Status.TIMEOUT)],
)
def test_a_fault_gets_the_same_verdict_from_a_spare(fault, status):
    # No torch.compile baseline: the fault fails in smoke, after the baseline worker, and
    # compiling the reference cost 20 s of the cold evaluation on two cores.
    opts = Options(
        guards=not fault.endswith("guards_off.py"),
        timeout_s=8,
        seed=1,
        prestart=False,
        compile_baseline=False,
    )
    cold = evaluate(FAULTS / fault, opts)
    ready_spare()
    warm, warm_s = timed(FAULTS / fault, opts)
    assert cold.status is warm.status is status, (cold.message, warm.message)
    assert cold.failure.stage == warm.failure.stage == "smoke"
    assert warm_s < opts.timeout_s + TIMEOUT_SLACK_S


@pytest.mark.slow
def test_each_evaluation_runs_in_a_fresh_pre_started_process(pid_kernel):
    opts = Options(guards=False, **FAST)  # prestart on: each run starts the next one's spare
    first = ready_spare()
    assert worker_pid(pid_kernel, opts) == str(first.work)
    second = ready_spare()  # started during the first evaluation
    assert second.pid != first.pid and not alive(first.pid)
    assert worker_pid(pid_kernel, opts) == str(second.work)
    assert prestart.spare() is not None and prestart.spare().pid not in (first.pid, second.pid)


@pytest.mark.slow
@pytest.mark.parametrize("timing", [False, True])
def test_under_the_interpreter_a_spare_starts_beside_untimed_runs_only(timing):
    # timed on the CPU, the spare's imports would share the cores being measured
    ready_spare()  # taken by the evaluation: any spare seen during it was started for the next
    seen: list[bool] = []
    opts = Options(quick=True, timing=timing, compile_baseline=False)
    # the baseline worker (trusted_baselines.py) runs first, before the spare is taken
    untimed = ("start-up", "baselines")
    v = evaluate(STARTER, opts, on_phase=lambda p: p in untimed or seen.append(
        prestart.spare() is not None))  # fmt: skip
    assert v.status is Status.PASS, v.message
    assert seen and any(seen) is not timing, seen
    assert prestart.spare() is not None  # a timed run starts it once it is done


@pytest.mark.slow
def test_a_killed_spare_is_replaced(pid_kernel):
    spare = ready_spare()
    os.killpg(spare.pid, signal.SIGKILL)
    spare.proc.wait()
    assert worker_pid(pid_kernel, Options(guards=False, prestart=False, **FAST)) != str(spare.work)


@pytest.mark.slow
def test_a_spare_lost_after_the_hand_over_is_retried(pid_kernel, monkeypatch):
    # a spare for the other mode, disguised: it takes the request, then exits without a phase
    # (as one killed between the liveness check and reading its request would)
    spare = prestart.Worker.start(True, worker_env())
    spare.force_cpu = False
    monkeypatch.setattr(prestart, "_spare", spare)
    assert worker_pid(pid_kernel, Options(guards=False, prestart=False, **FAST)) != str(spare.work)


@pytest.mark.slow
@pytest.mark.parametrize("change", ["mode", "environment"])
def test_a_mismatched_spare_is_not_used(change, pid_kernel, monkeypatch):
    spare = ready_spare(force_cpu=change == "mode")
    if change == "environment":
        monkeypatch.setenv("AUTOKERNEL_PRESTART_TEST", "changed after the spare started")
    assert worker_pid(pid_kernel, Options(guards=False, prestart=False, **FAST)) != str(spare.work)
    assert not alive(spare.pid)


@pytest.mark.slow
def test_secrets_never_reach_a_spare(monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-secret")
    monkeypatch.setenv("TRITON_HARMLESS_SETTING", "1")  # an allowed name (containment.py)
    environ = Path(f"/proc/{ready_spare().pid}/environ").read_bytes()
    assert b"OPENAI_API_KEY" not in environ and b"sk-test-secret" not in environ
    assert b"TRITON_HARMLESS_SETTING=1" in environ


ENV_KERNEL = (
    "KERNEL_TYPE = 'reduce'\nimport os\n"
    "raise RuntimeError('cache dirs ' + str(os.environ.get('TRITON_CACHE_DIR')) + ' '"
    " + str(os.environ.get('AUTOKERNEL_TRITON_READ_ONLY')))\n"
)


@pytest.mark.slow
@pytest.mark.parametrize("preset", [None, "users_own"])
def test_a_candidate_compiles_into_its_own_folder_and_reads_the_trusted_cache(
    tmp_path, monkeypatch, preset
):
    # Whatever the user set for their own processes, a candidate's worker writes Triton's cache
    # only inside its work directory (gone with it) and reads the trusted one: a cache it could
    # write would be code for the next reader (cache_tiers.py).
    from autokernel.harness import cache_tiers

    if preset:
        monkeypatch.setenv("TRITON_CACHE_DIR", str(tmp_path / preset))
    else:
        monkeypatch.delenv("TRITON_CACHE_DIR", raising=False)
    path = tmp_path / "kernel.py"
    path.write_text(ENV_KERNEL)
    verdict = evaluate(path, Options(guards=False, prestart=False, **FAST))
    own, read_only = verdict.message.split("cache dirs ")[1].split()
    assert own.startswith(tempfile.gettempdir()) and own.endswith("/cache/triton"), own
    assert "autokernel-worker-" in own and read_only == str(cache_tiers.trusted_root() / "triton")
    assert str(tmp_path) not in own


LAZY_KERNEL = (
    "KERNEL_TYPE = 'reduce'\nimport sys\n"
    "raise RuntimeError(f\"dynamo imported: {'torch._dynamo' in sys.modules}\")\n"
)


@pytest.mark.slow
def test_a_worker_never_imports_dynamo(tmp_path):
    # torch wraps a dispatch mode's __torch_dispatch__ in torch._dynamo.disable unless the mode
    # opts out: the op monitor's first dispatch then imported Dynamo, sympy and
    # torch.distributed, seconds of every worker's start-up (guards.TorchOpMonitor).
    path = tmp_path / "kernel.py"
    path.write_text(LAZY_KERNEL)
    ready_spare()
    verdict = evaluate(path, Options(guards=False, prestart=False, **FAST))
    assert "dynamo imported: False" in verdict.message


def test_a_gpu_worker_takes_tritons_install_hash_from_its_parent(monkeypatch):
    # Hashing libtriton took 0.5-0.8 s of each GPU worker's start-up; the parent, running the
    # same installation, hashes it once and hands it over in the environment.
    import triton.runtime.autotuner as autotuner
    import triton.runtime.cache as cache

    import autokernel.harness.worker_env as parent_env

    assert parent_env._triton_key() == cache.triton_key()
    for module in (cache, autotuner):
        monkeypatch.setattr(module, "triton_key", module.triton_key)  # restored afterwards
    monkeypatch.setenv(parent_env.TRITON_KEY_ENV, "the-parents-digest")
    parent_env.install_triton_key()
    assert cache.triton_key() == autotuner.triton_key() == "the-parents-digest"
    assert parent_env.TRITON_KEY_ENV in containment.minimal_env({parent_env.TRITON_KEY_ENV: "x"})


# Guards off: it reads the worker's files. Timed only while no spare beside it is starting.
QUIET_KERNEL = """
import tempfile
from pathlib import Path
KERNEL_TYPE = 'reduce'

def kernel_fn(x):
    if Path('progress').read_text().strip() == 'benchmark':
        others = [d for d in Path(tempfile.gettempdir()).glob('autokernel-worker-*')
                  if d.resolve() != Path.cwd().resolve()]
        if not others or not all((d / 'ready').exists() for d in others):
            raise RuntimeError(f'timed beside a spare in its start-up: {others}')
    return x.float().sum(-1).to(x.dtype)
"""


@pytest.mark.slow
def test_timing_waits_until_the_spare_beside_it_is_ready(tmp_path, monkeypatch):
    # As on a GPU, where the next spare starts beside the running evaluation: it must not be
    # in its start-up (imports, CUDA context) while the candidate is timed.
    monkeypatch.setattr(prestart.Worker, "device", lambda self: "cuda")
    # The kernel looks at the other workers' directories, which a sandbox hides from it.
    monkeypatch.setattr(containment, "probe", lambda: containment.Probe(containment.NONE))
    workers = tmp_path / "workers"  # only this test's worker directories, for the kernel to see
    workers.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(workers))
    monkeypatch.setenv("TMPDIR", str(workers))
    path = tmp_path / "kernel.py"
    path.write_text(QUIET_KERNEL)
    verdict = evaluate(path, Options(guards=False, seed=1, compile_baseline=False))
    assert verdict.status is Status.PASS, verdict.message


def marked_workers(mark: str) -> list[int]:
    """Worker processes (spares included) whose environment carries the mark."""
    found = []
    for entry in Path("/proc").iterdir():
        try:
            environ = (entry / "environ").read_bytes()
            cmdline = (entry / "cmdline").read_bytes()
        except (OSError, ValueError):
            continue
        if f"AUTOKERNEL_PRESTART_MARK={mark}".encode() in environ and b"harness.worker" in cmdline:
            found.append(int(entry.name))
    return found


# Ctrl-C raises KeyboardInterrupt, as in a terminal, even where the suite was started in the
# background of a shell script, whose children inherit SIGINT ignored (seen: a 60 s hang).
HANG = """
import signal, sys
signal.signal(signal.SIGINT, signal.default_int_handler)
from autokernel.harness.sandbox import Options, evaluate
evaluate(sys.argv[1], Options(timeout_s=600, timing=False))  # untimed: the spare starts beside
"""
LEAVE_A_SPARE = """
import os, signal, sys
from autokernel.harness import prestart
from autokernel.harness.sandbox import worker_env
prestart.keep_warm(False, worker_env())
print(prestart.spare().pid, prestart.spare().work, flush=True)
if sys.argv[1] == "killed":
    os.kill(os.getpid(), signal.SIGKILL)
"""


@pytest.mark.slow
def test_discard_kills_the_spare():
    spare = ready_spare()
    prestart.discard()
    assert not alive(spare.pid) and not spare.work.exists() and prestart.spare() is None


@pytest.mark.parametrize("end", ["exit", "killed"])
def test_a_spare_does_not_outlive_its_parent(end, monkeypatch):
    mark = uuid.uuid4().hex
    monkeypatch.setenv("AUTOKERNEL_PRESTART_MARK", mark)
    args = [sys.executable, "-c", LEAVE_A_SPARE, end]
    run = subprocess.run(args, cwd=ROOT, capture_output=True, text=True)
    pid, work = run.stdout.split()
    if end == "exit":  # atexit killed it before the parent was gone
        assert run.returncode == 0, run.stderr[-2000:]
        assert not alive(int(pid)) and not Path(work).exists() and marked_workers(mark) == []
        return
    # killed outright, no atexit: the spare sees the end of its stdin and exits by itself.
    # Contained, bwrap's --die-with-parent kills it at once, before it can remove its directory.
    contained = containment.kind() != containment.NONE
    deadline = time.monotonic() + READY_WAIT_S
    while alive(int(pid)) or (Path(work).exists() and not contained):
        assert time.monotonic() < deadline, "an orphaned spare kept running"
        time.sleep(0.1)
    shutil.rmtree(work, ignore_errors=True)


@pytest.mark.slow
def test_ctrl_c_leaves_no_worker_and_no_spare(monkeypatch):
    mark = uuid.uuid4().hex
    monkeypatch.setenv("AUTOKERNEL_PRESTART_MARK", mark)
    fault = str(FAULTS / "hang_python_loop.py")
    child = subprocess.Popen(
        [sys.executable, "-c", HANG, fault], cwd=ROOT, stderr=subprocess.PIPE, text=True
    )
    try:
        deadline = time.monotonic() + 2 * READY_WAIT_S
        while len(marked_workers(mark)) < 2:  # the hanging worker and the next one's spare
            assert child.poll() is None and time.monotonic() < deadline, "no spare was started"
            time.sleep(0.1)
        child.send_signal(signal.SIGINT)
        _, stderr = child.communicate(timeout=60)
        assert child.returncode != 0 and "KeyboardInterrupt" in stderr, stderr[-2000:]
    finally:
        child.kill()
        child.wait()
        left = marked_workers(mark)
        for pid in left:  # a failing run must not leave a hanging worker behind
            os.killpg(pid, signal.SIGKILL)
    assert left == []


@pytest.mark.slow
@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGKILL])
def test_a_worker_does_not_outlive_a_killed_harness(sig, monkeypatch):
    # A job timeout's SIGTERM or a SIGKILL runs no cleanup in the harness; its worker (own
    # session, mid-evaluation) must notice and go, or it keeps the GPU busy under the next job.
    mark = uuid.uuid4().hex
    monkeypatch.setenv("AUTOKERNEL_PRESTART_MARK", mark)
    fault = str(FAULTS / "hang_python_loop.py")
    child = subprocess.Popen([sys.executable, "-c", HANG, fault], cwd=ROOT)
    try:
        deadline = time.monotonic() + 2 * READY_WAIT_S
        while len(marked_workers(mark)) < 2:  # the hanging worker and the next one's spare
            assert child.poll() is None and time.monotonic() < deadline, "no spare was started"
            time.sleep(0.1)
        child.send_signal(sig)
        child.wait(timeout=60)
        deadline = time.monotonic() + 15
        while marked_workers(mark):
            assert time.monotonic() < deadline, "a worker outlived the killed harness"
            time.sleep(0.1)
    finally:
        child.kill()
        child.wait()
        for pid in marked_workers(mark):
            os.killpg(pid, signal.SIGKILL)
