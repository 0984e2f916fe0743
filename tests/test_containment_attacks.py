"""The attack kernels of tests/faults/escape_*.py evaluated through the real harness: contained,
each fails at import with nothing of the host shown or changed; with AUTOKERNEL_SANDBOX=off,
where the attack works, each shows the attack is real. All skip, with the reason, where
namespaces are unavailable."""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest
from containment_helpers import (
    DAEMON_MARK,
    PLANTED_KEY,
    REPO_ROOT,
    kill_all,
    needs_sandbox,
    processes_with,
)

from autokernel.harness import containment, task_cap
from autokernel.harness.sandbox import Options, evaluate
from autokernel.harness.verdict import Status

FAULTS = Path(__file__).parent / "faults"
# In the harness's environment only: no worker is given a variable of this name.
HOST_MARK_NAME, HOST_MARK = "HOST_ONLY_MARK", "host-only-value-4711"


OPTS = dict(timing=False, compile_baseline=False, guards=False, seed=1234, prestart=False)


def _evaluate_in_child(path: Path, sandbox: str) -> dict:
    """Evaluate in a fresh harness process whose own environment holds a key, as a user's does
    (/proc/<pid>/environ shows a process's environment as it was started)."""
    code = (
        "import json, sys\n"
        "from autokernel.harness.sandbox import Options, evaluate\n"
        f"v = evaluate(sys.argv[1], Options(**{OPTS!r}))\n"
        "print(json.dumps({'status': v.status.value, 'stage': v.failure.stage if v.failure "
        "else '', 'sandbox': v.sandbox, 'message': v.message, 'stderr': v.stderr_tail}))\n"
    )
    env = {**os.environ, "OPENAI_API_KEY": PLANTED_KEY, containment.SANDBOX_ENV: sandbox,
           HOST_MARK_NAME: HOST_MARK,
           "PYTHONPATH": os.pathsep.join(filter(None, [str(REPO_ROOT),
                                                       os.environ.get("PYTHONPATH")]))}  # fmt: skip
    done = subprocess.run([sys.executable, "-c", code, str(path)], env=env, capture_output=True,
                          text=True, timeout=600)  # fmt: skip
    assert done.returncode == 0, done.stderr[-2000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


def _evaluate(path: Path, sandbox: str, monkeypatch) -> tuple[Status, str, str]:
    monkeypatch.setenv(containment.SANDBOX_ENV, sandbox)
    containment.probe.cache_clear()
    try:
        verdict = evaluate(path, Options(**OPTS))
    finally:
        containment.probe.cache_clear()
    stage = verdict.failure.stage if verdict.failure else ""
    return verdict.status, stage, verdict.sandbox


@pytest.fixture
def workspace(tmp_path):
    """A workspace as `run` leaves it: a git repo, results.tsv, a key in autokernel.yaml."""
    ws = tmp_path / "ws"
    ws.mkdir()
    subprocess.run(["git", "init", "-q", str(ws)], check=True)
    (ws / "results.tsv").write_text("experiment\tcommit\n")
    (ws / "autokernel.yaml").write_text(f"openai_api_key: {PLANTED_KEY}\n")
    return ws


def _forged(ws: Path) -> bool:
    refs = ws / ".git" / "refs" / "autokernel"
    return "forged" in (ws / "results.tsv").read_text() or refs.exists()


@pytest.mark.slow
@needs_sandbox
@pytest.mark.parametrize("name", ["escape_workspace_write", "escape_workspace_config"])
def test_workspace_attacks(name, workspace, monkeypatch):
    kernel = workspace / "kernel.py"
    shutil.copy(FAULTS / f"{name}.py", kernel)
    status, stage, sandbox = _evaluate(kernel, "auto", monkeypatch)
    assert (status, stage, sandbox) == (Status.CRASH, "import", "bwrap")
    assert not _forged(workspace)
    status, stage, sandbox = _evaluate(kernel, "off", monkeypatch)  # the attack is real
    assert (status, stage, sandbox) == (Status.FAIL, "smoke", "none")
    if name == "escape_workspace_write":
        assert _forged(workspace)


@pytest.mark.slow
@needs_sandbox
def test_parent_environ_attack():
    path = FAULTS / "escape_proc_environ.py"
    got = _evaluate_in_child(path, "auto")
    assert (got["status"], got["stage"], got["sandbox"]) == ("CRASH", "import", "bwrap"), got
    assert PLANTED_KEY not in json.dumps(got)
    got = _evaluate_in_child(path, "off")  # the attack is real: the key is found
    assert (got["status"], got["stage"]) == ("FAIL", "smoke"), got


@pytest.mark.slow
@needs_sandbox
def test_a_link_in_the_work_dir_shows_nothing_of_the_host():
    """escape_stderr_symlink.py points the worker's stderr file at /proc/self/environ. The
    judge quotes that file in the verdict (and so in the next prompt); opened outside the
    sandbox, the link would give the judge's own environment."""
    got = _evaluate_in_child(FAULTS / "escape_stderr_symlink.py", "auto")
    assert (got["status"], got["stage"], got["sandbox"]) == ("CRASH", "import", "bwrap"), got
    assert HOST_MARK not in json.dumps(got)


@pytest.mark.slow
@needs_sandbox
def test_write_outside_attack(monkeypatch):
    status, stage, _ = _evaluate(FAULTS / "escape_write_outside.py", "auto", monkeypatch)
    assert (status, stage) == (Status.CRASH, "import")
    status, stage, _ = _evaluate(FAULTS / "escape_write_outside.py", "off", monkeypatch)
    assert (status, stage) == (Status.FAIL, "smoke")


@pytest.mark.slow
@needs_sandbox
def test_network_attack(monkeypatch):
    with socket.create_server(("127.0.0.1", 0)) as server:
        server.listen()
        status, stage, _ = _evaluate(FAULTS / "escape_network.py", "auto", monkeypatch)
        assert (status, stage) == (Status.CRASH, "import")
        status, stage, _ = _evaluate(FAULTS / "escape_network.py", "off", monkeypatch)
        assert (status, stage) == (Status.FAIL, "smoke")


@pytest.mark.slow
@needs_sandbox
def test_daemon_attack(monkeypatch):
    kill_all(DAEMON_MARK)
    try:
        status, stage, _ = _evaluate(FAULTS / "escape_setsid_daemon.py", "auto", monkeypatch)
        assert (status, stage) == (Status.CRASH, "import")
        time.sleep(0.5)
        assert not processes_with(DAEMON_MARK), "the daemon outlived the evaluation"
        # Uncontained and uncapped: a task cap's pids cgroup (task_cap.py, root) ends it too.
        uncapped = task_cap.Plan(task_cap.NONE, "off for this test")
        monkeypatch.setattr(task_cap, "plan", lambda sandbox, uid=None: uncapped)
        _evaluate(FAULTS / "escape_setsid_daemon.py", "off", monkeypatch)
        assert processes_with(DAEMON_MARK), "uncontained, the daemon should have survived"
    finally:
        kill_all(DAEMON_MARK)
