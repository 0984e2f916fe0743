"""Where no sandbox is available (or it is switched off): LLM agents refuse to start unless
told --unsafe-no-sandbox, the tuner warns and runs, and its rows say sandbox=none."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest
from containment_helpers import REPO_ROOT

from autokernel.harness import containment


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
