"""`autokernel run --workers 2` and `--ray-address` end to end: the real CLI, real worker
processes or Ray actors, the real sandboxed harness (Triton interpreter), real git. One worker
is killed with SIGKILL mid-evaluation, then the driver, then the run is resumed: every
experiment has exactly one row and one commit, in order, and the lost evaluation says so.

Slow (each interpreter evaluation is seconds and two share the CPU); the Ray case also starts a
local cluster (`ray start --head`) and is skipped where Ray is not installed.
"""

from __future__ import annotations

import contextlib
import importlib.util
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest

from autokernel.run.results import ResultsLog
from autokernel.run.worker_log import WorkerLog

CLI = [sys.executable, "-m", "autokernel.cli"]
ENV = {**os.environ, "COLUMNS": "200", "RAY_AUTH_MODE": "disabled", "RAY_USAGE_STATS_ENABLED": "0"}
HAVE_RAY = importlib.util.find_spec("ray") is not None
NO_RAY = "Ray is not installed: pip install -e '.[ray]'"
STEP_S = 400  # one phase of the scenario; interpreter evaluations on a loaded 2-core machine


def git(root: Path, *args: str) -> str:
    return subprocess.run(
        ["git", *args], cwd=root, capture_output=True, text=True, check=True
    ).stdout.strip()


def rows(root: Path) -> list[dict[str, str]]:
    return ResultsLog(root / "results.tsv").read()


def state(root: Path) -> dict:
    try:
        return json.loads((root / ".autokernel" / "state.json").read_text())
    except (OSError, ValueError):
        return {}


def wait_for(what: str, check, proc: subprocess.Popen, log: Path) -> object:
    deadline = time.monotonic() + STEP_S
    while time.monotonic() < deadline:
        got = check()
        if got:
            return got
        if proc.poll() is not None:
            pytest.fail(f"the run ended before {what}:\n{log.read_text()[-4000:]}")
        time.sleep(0.3)
    pytest.fail(f"never saw {what}:\n{log.read_text()[-4000:]}")


def busy_worker_pid(ws: Path) -> int | None:
    """The pid of a worker that is evaluating a queued experiment now."""
    running = [e for e in state(ws).get("queue", []) if e["worker"] and not e["evaluated"]]
    if not running:
        return None
    started = [r for r in WorkerLog(ws).read() if r["event"] == "started"]
    for r in reversed(started):
        if r["slot"] == running[0]["worker"]:
            return int(re.search(r"pid (\d+)", r["where"]).group(1))
    return None


def scenario(tmp_path: Path, backend: list[str]) -> None:
    ws, log_path = tmp_path / "ws", tmp_path / "run.log"
    with log_path.open("w") as log:
        proc = subprocess.Popen(
            [*CLI, "run", "--kernel", "softmax", *backend, "--max-experiments", "12", "--quick",
             "--quiet", "--workspace", str(ws)],
            stdout=log, stderr=subprocess.STDOUT, env=ENV, cwd=tmp_path, start_new_session=True,
        )  # fmt: skip
    try:
        wait_for("two rows", lambda: len(rows(ws)) >= 2, proc, log_path)
        pid = wait_for("a worker evaluating", lambda: busy_worker_pid(ws), proc, log_path)
        os.kill(pid, signal.SIGKILL)  # the worker, mid-evaluation
        rerun = lambda: any("re-run after" in r["description"] for r in rows(ws))
        wait_for("the lost evaluation re-run", rerun, proc, log_path)
        assert proc.poll() is None  # so the driver is killed mid-run, below
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)  # then the driver, with no cleanup
        proc.wait()
    before = rows(ws)
    # +1: a driver killed between an experiment's row and its state is finished by the resume,
    # which counts it towards --max-experiments though its row was there
    want = max(2, 7 - len(before))
    out = subprocess.run(
        [*CLI, "run", "--resume", "--max-experiments", str(want), "--quick",
         "--quiet", "--workspace", str(ws)],
        capture_output=True, text=True, timeout=STEP_S, env=ENV, cwd=tmp_path,
    )  # fmt: skip
    assert out.returncode == 0, out.stdout + out.stderr
    assert "Traceback" not in out.stderr
    got = rows(ws)
    assert [int(r["experiment"]) for r in got] == list(range(len(got))) and len(got) >= 6
    assert got[: len(before)] == before  # nothing rewritten
    # one kill, one loss: the re-run was not handed to the worker while it restarted
    assert any("re-run after 1 lost worker" in r["description"] for r in got)
    descriptions = [r["description"].split(" (re-run")[0] for r in got]
    assert len(descriptions) == len(set(descriptions))  # no proposal evaluated twice
    for r in got:
        sha = git(ws, "rev-parse", r["commit"])
        assert git(ws, "log", "-1", "--format=%s", sha).startswith(f"exp {r['experiment']} [")
        if r["status"] != "keep":
            assert git(ws, "rev-parse", f"refs/autokernel/attempts/{r['experiment']}") == sha
    branch = [int(s.split()[1]) for s in git(ws, "log", "--format=%s", "--reverse").splitlines()
              if s.startswith("exp ")]  # fmt: skip
    assert branch == [int(r["experiment"]) for r in got if r["status"] == "keep"]
    final = state(ws)
    assert final["queue"] == [] and final["in_flight"] is None
    assert git(ws, "rev-parse", "HEAD") == final["head"]
    assert git(ws, "status", "--porcelain") == ""


@pytest.mark.slow
def test_local_workers_survive_a_killed_worker_and_driver(tmp_path):
    scenario(tmp_path, ["--workers", "2"])


@pytest.fixture(scope="module")
def ray_cluster():
    """A local Ray head with two CPUs, stopped by its process group at the end."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    temp = tempfile.mkdtemp(prefix="akray", dir="/tmp")  # Ray's socket paths must stay short
    ray = Path(sys.executable).with_name("ray")
    # Without the driver's PYTHONPATH, as a cluster started from another shell: the actors must
    # get the driver's checkout from the driver (ray_pool.code_path), or the run stops.
    head_env = {k: v for k, v in ENV.items() if k != "PYTHONPATH"}
    head = subprocess.Popen(
        [str(ray), "start", "--head", "--block", "--num-cpus=2", f"--port={port}",
         "--include-dashboard=false", f"--temp-dir={temp}", "--disable-usage-stats"],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=head_env, cwd=temp,
        start_new_session=True,
    )  # fmt: skip
    address = f"127.0.0.1:{port}"
    probe = f"import ray; ray.init(address={address!r}); ray.shutdown()"
    deadline = time.monotonic() + 120
    while subprocess.run([sys.executable, "-c", probe], env=ENV, capture_output=True).returncode:
        if time.monotonic() > deadline or head.poll() is not None:
            pytest.fail("the local Ray cluster did not start")
        time.sleep(1)
    yield address
    with contextlib.suppress(ProcessLookupError):
        os.killpg(head.pid, signal.SIGTERM)
    try:
        # Ray 2.60's head takes about 33 s to stop on SIGTERM: every wait of 20 s ran out and
        # ended in the SIGKILL below, which takes the whole group (gcs, raylet, actors) at once.
        head.wait(3)
    except subprocess.TimeoutExpired:
        os.killpg(head.pid, signal.SIGKILL)
        head.wait()
    shutil.rmtree(temp, ignore_errors=True)


@pytest.mark.slow
@pytest.mark.skipif(not HAVE_RAY, reason=NO_RAY)
def test_ray_actors_survive_a_killed_worker_and_driver(tmp_path, ray_cluster):
    scenario(tmp_path, ["--ray-address", ray_cluster, "--workers", "2"])


@pytest.mark.slow
@pytest.mark.skipif(not HAVE_RAY, reason=NO_RAY)
def test_ray_workers_beyond_the_cluster_are_capped_and_said(ray_cluster, monkeypatch):
    import autokernel.ray_pool as ray_pool

    monkeypatch.setattr(ray_pool, "ACTOR_START_S", 60.0)  # a third actor would never start
    pool = ray_pool.RayPool(ray_cluster, 3, on_gpu=False)  # the fixture's cluster has 2 CPUs
    try:
        assert pool.slots == ["r0", "r1"]
        assert "--workers 3: the Ray cluster has 2 CPU(s), so 2 workers" in pool.note
    finally:
        pool.close()


@pytest.mark.slow
@pytest.mark.skipif(not HAVE_RAY, reason=NO_RAY)
def test_ray_workers_running_other_autokernel_sources_stop_the_run(ray_cluster, monkeypatch):
    import autokernel.ray_pool as ray_pool
    from autokernel.pool import PoolError

    # the actors import this checkout; the driver pretends to run other sources
    monkeypatch.setattr(ray_pool, "code_fingerprint", lambda: "0" * 16)
    with pytest.raises(PoolError, match="run other autokernel sources") as err:
        ray_pool.RayPool(ray_cluster, 1, on_gpu=False)
    assert "\n" not in str(err.value) and "install the same autokernel" in str(err.value)
