"""`autokernel run` end to end: the real CLI, the real sandboxed harness (Triton interpreter),
real git. Slow-ish (each evaluation is seconds on the CPU), so runs stay a few experiments."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from autokernel.run.results import ResultsLog

ROOT = Path(__file__).resolve().parents[1]
CLI = [sys.executable, "-m", "autokernel.cli"]


def autokernel(*args: str, env: dict | None = None, timeout: float = 600):
    return subprocess.run(
        [*CLI, *args], capture_output=True, text=True, timeout=timeout,
        env={**os.environ, "COLUMNS": "200", **(env or {})},
    )  # fmt: skip


def git(root: Path, *args: str) -> str:
    return subprocess.run(
        ["git", *args], cwd=root, capture_output=True, text=True, check=True
    ).stdout.strip()


def rows(root: Path) -> list[dict[str, str]]:
    return ResultsLog(root / "results.tsv").read()


def assert_consistent(root: Path) -> list[dict[str, str]]:
    got = rows(root)
    assert [int(r["experiment"]) for r in got] == list(range(len(got)))
    for r in got:
        git(root, "rev-parse", "--verify", r["commit"] + "^{commit}")
    assert git(root, "status", "--porcelain") == ""
    state = json.loads((root / ".autokernel" / "state.json").read_text())
    assert state["in_flight"] is None and git(root, "rev-parse", "HEAD") == state["head"]
    return got


@pytest.mark.slow
def test_tuner_run_then_status(tmp_path):
    ws = tmp_path / "ws"
    out = autokernel("run", "--kernel", "softmax", "--max-experiments", "3", "--quick",
                     "--quiet", "--workspace", str(ws))  # fmt: skip
    assert out.returncode == 0, out.stdout + out.stderr
    assert "Traceback" not in out.stderr
    assert "exp 0 [softmax] keep" in out.stdout and "reached --max-experiments 3" in out.stdout
    got = assert_consistent(ws)
    assert len(got) == 3 and got[0]["agent"] == "starter" and got[1]["agent"] == "tuner"
    assert all(r["correctness"] == "PASS" for r in got)
    assert git(ws, "rev-parse", "--abbrev-ref", "HEAD").startswith("autokernel/")
    for r in got[1:]:
        if r["status"] == "revert":
            assert git(ws, "rev-parse", f"refs/autokernel/attempts/{r['experiment']}")
    assert (ws / ".autokernel" / "run.log").read_text().count("exp ") >= 3
    status = autokernel("status", "--workspace", str(ws))
    assert status.returncode == 0 and "softmax" in status.stdout


@pytest.mark.slow
def test_kill_9_mid_experiment_then_resume_loses_and_repeats_nothing(tmp_path):
    ws = tmp_path / "ws"
    log = (tmp_path / "run.log").open("w")
    proc = subprocess.Popen(
        [*CLI, "run", "--kernel", "rmsnorm", "--max-experiments", "6", "--quick", "--quiet",
         "--workspace", str(ws)],
        stdout=log, stderr=subprocess.STDOUT, start_new_session=True,
    )  # fmt: skip
    state_file = ws / ".autokernel" / "state.json"
    deadline = time.monotonic() + 300
    try:
        while time.monotonic() < deadline:  # wait for experiment 1 to be under evaluation
            time.sleep(0.2)
            if proc.poll() is not None:
                pytest.fail(
                    "the run ended before experiment 1:\n" + (tmp_path / "run.log").read_text()
                )
            try:
                flight = json.loads(state_file.read_text()).get("in_flight")
            except (OSError, ValueError):
                continue
            if flight and flight["experiment"] >= 1 and flight["commit"]:
                time.sleep(1.0)
                break
        else:
            pytest.fail(
                "the run never reached experiment 1:\n" + (tmp_path / "run.log").read_text()
            )
    finally:
        with contextlib.suppress(ProcessLookupError):  # the parent and its worker, no cleanup
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
    before = rows(ws)
    out = autokernel("run", "--resume", "--max-experiments", "2", "--quick", "--quiet",
                     "--workspace", str(ws))  # fmt: skip
    assert out.returncode == 0, out.stdout + out.stderr
    assert "evaluating it again" in out.stdout or "recorded verdict" in out.stdout
    after = assert_consistent(ws)
    assert after[: len(before)] == before and len(after) == len(before) + 2


@pytest.mark.slow
def test_ctrl_c_stops_after_the_current_experiment(tmp_path):
    ws = tmp_path / "ws"
    proc = subprocess.Popen(
        [*CLI, "run", "--kernel", "reduce", "--max-experiments", "8", "--quick", "--quiet",
         "--workspace", str(ws)],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    deadline = time.monotonic() + 300
    while time.monotonic() < deadline and len(rows(ws)) < 1:
        time.sleep(0.2)
    proc.send_signal(signal.SIGINT)
    out, err = proc.communicate(timeout=300)
    assert proc.returncode == 0, out + err
    assert "Ctrl-C" in out and "--resume" in out
    got = assert_consistent(ws)
    assert 1 <= len(got) <= 2


@pytest.mark.slow
def test_command_agent(tmp_path):
    script = tmp_path / "agent.py"
    script.write_text(
        "import sys, re\n"
        "prompt = sys.stdin.read()\n"
        f"src = open({str(ROOT / 'kernels' / 'softmax.py')!r}).read()\n"
        "src = src.replace('\"num_warps\": 8', '\"num_warps\": 4', 1)\n"
        "print('HYPOTHESIS: fewer warps for short rows')\n"
        "print('```python')\nprint(src)\nprint('```')\n"
    )
    ws = tmp_path / "ws"
    out = autokernel("run", "--kernel", "softmax", "--agent", "command", "--agent-command",
                     f"{sys.executable} {script}", "--max-experiments", "2", "--quick",
                     "--quiet", "--workspace", str(ws))  # fmt: skip
    assert out.returncode == 0, out.stdout + out.stderr
    got = assert_consistent(ws)
    assert got[1]["agent"].startswith("command") and got[1]["status"] in ("keep", "revert")
    assert got[1]["description"] == "fewer warps for short rows"
    assert '"num_warps": 4' in git(ws, "show", f"{got[1]['commit']}:kernel.py")


# ---- bad input: a message that says what to do, exit code 2, no traceback, nothing touched --


@pytest.mark.slow
@pytest.mark.parametrize(
    "args,message",
    [
        (["--kernel", "softmaxx"], "choose one of"),
        ([], "nothing to optimize"),
        (["--resume"], "nothing to resume"),
        (["--kernel", "softmax", "--shape", "12"], "give 2 numbers"),
        (["--kernel", "softmax", "--agent", "gpt"], "unknown agent"),
        (["--kernel", "softmax", "--agent", "openai", "--llm-model", "m"], "OPENAI_API_KEY"),
        (["--kernel", "softmax", "--agent", "anthropic", "--llm-model", "m"], "ANTHROPIC_API_KEY"),
        (["--kernel", "softmax", "--hours", "0"], "positive"),
    ],
)
def test_bad_input_is_a_clear_error_before_anything_changes(tmp_path, args, message):
    ws = tmp_path / "ws"
    env = {"OPENAI_API_KEY": "", "ANTHROPIC_API_KEY": ""}
    out = autokernel("run", *args, "--workspace", str(ws), env=env, timeout=120)
    assert out.returncode == 2, out.stdout + out.stderr
    assert message.lower() in (out.stdout + out.stderr).lower()
    assert "Traceback" not in out.stderr
    assert not (ws / ".git").exists()


@pytest.mark.slow
def test_dirty_kernel_py_is_refused(tmp_path):
    ws = tmp_path / "ws"
    ws.mkdir()
    git(ws, "init", "-q")
    (ws / "kernel.py").write_text("# mine\n")
    git(ws, "add", "kernel.py")
    git(ws, "-c", "user.name=u", "-c", "user.email=u@x", "commit", "-qm", "mine")
    (ws / "kernel.py").write_text("# mine, edited\n")
    out = autokernel("run", "--kernel", "softmax", "--workspace", str(ws), timeout=120)
    assert out.returncode == 2 and "commit or stash kernel.py" in out.stderr
    assert (ws / "kernel.py").read_text() == "# mine, edited\n"
    assert git(ws, "branch", "--list", "autokernel/*") == ""
