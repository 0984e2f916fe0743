"""The cap on a candidate worker's processes and threads (autokernel/harness/task_cap.py).

Fast tests check the limit-setting code and each mechanism on a small process; the slow one
evaluates the fork bomb of tests/faults/ through the real harness and looks for survivors. The
non-root path is exercised on the CI machine (root) by switching to nobody with runuser.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest
from containment_helpers import processes_with

from autokernel.harness import containment, prestart, task_cap
from autokernel.harness.sandbox import Options, evaluate
from autokernel.harness.verdict import Status
from tests.bwrap_copy import copy_bwrap

REPO_ROOT = Path(__file__).resolve().parents[1]
FORK_BOMB = REPO_ROOT / "tests" / "faults" / "fork_bomb_guards_off.py"
BOMB_MARK = "59.4711"  # as in tests/faults/fork_bomb_guards_off.py
AVAILABLE = containment.probe()
PLAN = task_cap.plan(AVAILABLE.kind)
# Start threads until one is refused or 500 run; print how many started.
THREADS = (
    "import threading\n"
    "threading.stack_size(64 << 10)\n"
    "stop, n = threading.Event(), 0\n"
    "try:\n"
    "    while n < 500:\n"
    "        threading.Thread(target=stop.wait, daemon=True).start(); n += 1\n"
    "except RuntimeError:\n"
    "    pass\n"
    "print(n)\n"
)


def test_the_cap_scales_with_the_cores_above_what_an_evaluation_uses():
    assert task_cap.max_tasks(2) == 264 and task_cap.max_tasks(128) == 768
    # Measured: 5 tasks on 2 cores, one thread per core beyond the constant: 4x headroom at least.
    for cpus in (1, 2, 16, 128, 512):
        assert task_cap.max_tasks(cpus) >= 4 * (5 + cpus)


def test_no_rlimit_in_the_hosts_own_user_namespace():
    """There RLIMIT_NPROC would count every process of the user, not the sandbox's."""
    code = (
        "import resource\n"
        "from autokernel.harness import task_cap\n"
        "before = resource.getrlimit(resource.RLIMIT_NPROC)\n"
        "print(task_cap.in_initial_user_namespace(), task_cap.limit_tasks(50),"
        " resource.getrlimit(resource.RLIMIT_NPROC) == before)\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          env={**os.environ, "PYTHONPATH": str(REPO_ROOT)}, timeout=60)  # fmt: skip
    assert done.stdout.split() == ["True", "False", "True"], done.stderr


def test_the_cap_comes_from_the_parent(monkeypatch):
    monkeypatch.setenv(task_cap.CAP_ENV, "300")
    assert task_cap.cap_from_env() == 300
    monkeypatch.setenv(task_cap.CAP_ENV, "lots")
    assert task_cap.cap_from_env() == 0
    monkeypatch.delenv(task_cap.CAP_ENV)
    assert task_cap.cap_from_env() == 0


def test_the_plan_picks_the_rlimit_only_where_the_kernel_enforces_it():
    assert task_cap.plan("bwrap", uid=1000).kind == task_cap.RLIMIT
    for sandbox, uid in (("bwrap", 0), ("none", 1000), ("none", 0)):
        assert task_cap.plan(sandbox, uid).kind in (task_cap.CGROUP, task_cap.NONE)


@pytest.mark.skipif(AVAILABLE.kind == containment.NONE, reason="no containment here")
def test_limit_tasks_sets_rlimit_nproc_inside_the_sandbox(tmp_path):
    code = (
        "import resource\n"
        "from autokernel.harness import task_cap\n"
        "print(task_cap.in_initial_user_namespace(), task_cap.limit_tasks(50),"
        " *resource.getrlimit(resource.RLIMIT_NPROC))\n"
    )
    env = {**os.environ, "PYTHONPATH": str(REPO_ROOT)}
    argv, inner = containment.build(AVAILABLE.binary, [sys.executable, "-c", code], env, tmp_path)
    done = subprocess.run(argv, env=inner, capture_output=True, text=True, timeout=60)
    assert done.stdout.split() == ["False", "True", "50", "50"], done.stderr


@pytest.mark.skipif(AVAILABLE.kind == containment.NONE, reason="no containment here")
def test_an_unprivileged_sandbox_counts_its_own_tasks_alone():
    """What the RLIMIT path rests on: for an ordinary user the count behind RLIMIT_NPROC is kept
    per user namespace, so a sandbox capped at 40 stops at about 40 threads however many
    processes the same user runs outside it (here 60, more than the cap)."""
    python = "/usr/bin/python3"
    if os.geteuid() != 0 or shutil.which("runuser") is None or not os.path.exists(python):
        pytest.skip("needs root, runuser and a system python3 to run as nobody")
    place = Path(tempfile.mkdtemp(prefix="autokernel-nproc-"))
    holders = []
    try:
        copy = copy_bwrap(Path(AVAILABLE.binary), place)
        nobody = ["runuser", "-u", "nobody", "--"]
        holders = [subprocess.Popen([*nobody, "sleep", "60"]) for _ in range(60)]
        code = "import resource\nresource.setrlimit(resource.RLIMIT_NPROC, (40, 40))\n" + THREADS
        argv = [str(copy), "--unshare-all", "--unshare-user", "--die-with-parent",
                "--ro-bind", "/", "/", "--proc", "/proc", "--dev", "/dev", "--tmpfs", "/tmp",
                "--", python, "-c", code]  # fmt: skip
        done = subprocess.run([*nobody, *argv], capture_output=True, text=True, timeout=60)
        assert done.returncode == 0, done.stderr
        assert 30 <= int(done.stdout) < 40, done.stdout
    finally:
        for holder in holders:
            holder.kill()
            holder.wait()
        shutil.rmtree(place, ignore_errors=True)


@pytest.mark.skipif(PLAN.kind != task_cap.CGROUP, reason=f"no pids cgroup here: {PLAN.reason}")
def test_a_pids_cgroup_caps_its_tasks_and_leaves_nothing_behind():
    """The root path: inside the cgroup threads stop at the cap, even for root, and closing it
    kills a setsid daemon the process left and removes the cgroup."""
    assert PLAN.hierarchy is not None
    cgroup = task_cap.PidsCgroup(PLAN.hierarchy, 40)
    mark = f"autokernel-cgroup-daemon-{os.getpid()}"
    daemon = (
        "import subprocess, sys\n"
        "subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(60)', "
        f"{mark!r}], start_new_session=True, stdout=subprocess.DEVNULL,"
        " stderr=subprocess.DEVNULL)\n"
    )
    try:
        argv = cgroup.wrap([sys.executable, "-c", daemon + THREADS])
        done = subprocess.run(argv, capture_output=True, text=True, timeout=60)
        assert done.returncode == 0, done.stderr
        assert 30 <= int(done.stdout) < 40, done.stdout
        assert processes_with(mark), "the daemon did not start"
    finally:
        cgroup.close()
    assert not processes_with(mark)
    assert not cgroup.path.exists()


def test_no_cap_is_a_note_on_the_worker_not_an_error(monkeypatch):
    reason = "no cap on the kernel's processes and threads (planted)"
    monkeypatch.setattr(task_cap, "plan", lambda sandbox, uid=None: task_cap.Plan("none", reason))
    worker = prestart.Worker.start(True, dict(os.environ))
    try:
        assert worker.cap_note == reason and worker.cgroup is None
    finally:
        worker.close()


@pytest.mark.slow
@pytest.mark.skipif(PLAN.kind == task_cap.NONE, reason=PLAN.reason)
def test_a_fork_bomb_ends_in_a_crash_and_leaves_no_process():
    opts = Options(timing=False, compile_baseline=False, guards=False, seed=1234,
                   prestart=False, timeout_s=120)  # fmt: skip
    t0 = time.monotonic()
    verdict = evaluate(FORK_BOMB, opts)
    elapsed = time.monotonic() - t0
    assert verdict.status is Status.CRASH and verdict.failure is not None, verdict.message
    assert verdict.failure.stage == "smoke" and "fork refused after" in verdict.message
    started = int(verdict.message.split("fork refused after ")[1].split()[0])
    assert started < task_cap.max_tasks(), verdict.message  # the cap, not SELF_LIMIT, stopped it
    assert elapsed < opts.timeout_s, f"took {elapsed:.0f} s"
    deadline = time.monotonic() + 5  # the namespace's last tasks are reaped asynchronously
    while processes_with(BOMB_MARK) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not processes_with(BOMB_MARK), "a bomb's child survived the evaluation"
    if PLAN.kind == task_cap.CGROUP and PLAN.hierarchy is not None:
        assert not list(PLAN.hierarchy.glob(f"{task_cap.PREFIX}{os.getpid()}-*"))
