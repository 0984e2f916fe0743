"""No configured key value reaches a file we write or a prompt we send: verdict JSON, run.log,
terminal lines, results.tsv, commit messages, prompts. Keys live outside the workspace."""

from __future__ import annotations

import io
import os
import stat
import subprocess
from pathlib import Path

import pytest
from rich.console import Console

from autokernel import secrets
from autokernel.agents.base import Context
from autokernel.agents.factory import load_settings, user_config_path
from autokernel.agents.prompt import build_messages
from autokernel.harness.verdict import Check, Status, Verdict
from autokernel.run.results import ResultRow, ResultsLog, RowStatus
from autokernel.run.workspace import Workspace
from autokernel.secrets import MASK, redact, register_secret
from autokernel.views.live import RunView

KEY = "sk-test-Zq8w3Lr5Tn1Vb7Xc9Md2Kf4Hg6Jp0Ys"  # what a provider key looks like
FILE_KEY = "sk-ant-file-Pq2Wd4Re6Ty8Ui0Op1As3Df5Gh7Jk9"


@pytest.fixture(autouse=True)
def _env(tmp_path, monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", KEY)
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "xdg"))
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    monkeypatch.setenv("GIT_CONFIG_NOSYSTEM", "1")
    monkeypatch.setenv("GIT_CONFIG_GLOBAL", os.devnull)
    monkeypatch.setattr(secrets, "_registered", set())


def leak(prefix: str = "") -> str:
    """What a candidate that read the key would raise: whole, and cut after its 5th char."""
    return f"{prefix}RuntimeError: key={KEY} tail={KEY[5:]}"


def assert_clean(text: str) -> None:
    assert KEY not in text and KEY[5:] not in text and KEY[5:25] not in text, text
    assert MASK in text


# --- redact ------------------------------------------------------------------------------------


def test_redact_masks_whole_values_and_long_runs_of_them():
    assert_clean(redact(leak()))
    assert redact(f"a {KEY[3:20]} b") == f"a {MASK} b"  # 17 chars of it
    assert redact(f"a {KEY[3:12]} b") == f"a {KEY[3:12]} b"  # 9 chars: chance, not a leak
    assert redact("nothing to hide") == "nothing to hide"


def test_only_credential_variables_and_long_values_count(monkeypatch):
    monkeypatch.setenv("TOKENIZERS_PARALLELISM", "falsefalse")
    monkeypatch.setenv("HF_TOKEN", "short")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "aws-secret-value-123")
    assert redact("falsefalse short aws-secret-value-123") == f"falsefalse short {MASK}"


def test_registered_values_are_masked():
    register_secret("from-a-config-file-1234")
    register_secret("tiny")  # too short to redact without eating ordinary words
    assert redact("x from-a-config-file-1234 tiny") == f"x {MASK} tiny"


# --- every writer ------------------------------------------------------------------------------


def test_verdict_json(tmp_path):
    v = Verdict(Status.CRASH, "softmax", message=leak("CRASH in smoke: "))
    v.failure = Check("smoke", "", "", False, leak())
    v.stderr_tail = leak()
    v.write(tmp_path / "1.json")
    assert_clean((tmp_path / "1.json").read_text())


def test_results_rows(tmp_path):
    ResultsLog(tmp_path / "results.tsv").append(
        {"experiment": 1, "target": "softmax", "status": "crash", "description": leak()}
    )
    assert_clean((tmp_path / "results.tsv").read_text())


def test_run_log_and_terminal_lines(tmp_path):
    out = io.StringIO()
    with RunView(tmp_path, quiet=True, console=Console(file=out, width=400)) as view:
        view.event(leak("provider said: "))
        row = ResultRow(1, None, "softmax", None, RowStatus.CRASH, description=leak())
        view.experiment(row, "crashed")
        view.log_exception(RuntimeError(leak()))
    assert_clean(out.getvalue())
    assert_clean((tmp_path / ".autokernel" / "run.log").read_text())


def test_commit_messages(tmp_path):
    root = tmp_path / "ws"
    root.mkdir()
    ws = Workspace.open(root)
    sha = ws.start("night", "def kernel_fn(x):\n    return x\n", leak("exp 0: "))
    log = subprocess.run(["git", "log", "--format=%B", sha], cwd=root, capture_output=True,
                         text=True, check=True).stdout  # fmt: skip
    assert_clean(log)


def test_prompts_sent_to_the_llm():
    ctx = Context(1, "softmax", "softmax", "playbook", "spec", "ref", "def kernel_fn(x): ...",
                  history=[{"experiment": "1", "status": "crash", "description": leak()}],
                  last_failure=leak())  # fmt: skip
    system, messages = build_messages(ctx)
    assert_clean(system + "\n" + "\n".join(m["content"] for m in messages))


# --- where keys live ---------------------------------------------------------------------------


def write_user_config(text: str, mode: int) -> Path:
    path = user_config_path()
    path.parent.mkdir(parents=True)
    path.write_text(text)
    path.chmod(mode)
    return path


def test_user_config_is_read_and_its_keys_redacted(tmp_path, capsys, monkeypatch):
    monkeypatch.delenv("OPENAI_API_KEY")
    path = write_user_config(f"openai_api_key: {FILE_KEY}\nllm_model: m1\n", 0o600)
    assert path == tmp_path / "xdg" / "autokernel" / "config.yaml"
    assert load_settings(tmp_path / "ws") == {"openai_api_key": FILE_KEY, "llm_model": "m1"}
    assert capsys.readouterr().err == ""  # 0600 and outside the workspace: nothing to say
    assert redact(f"echo {FILE_KEY}") == f"echo {MASK}"


def test_a_user_config_others_can_read_draws_the_chmod_fix(tmp_path, capsys):
    path = write_user_config(f"openai_api_key: {FILE_KEY}\n", 0o644)
    load_settings(tmp_path)
    err = capsys.readouterr().err
    assert f"chmod 600 {path}" in err and len(err.strip().splitlines()) == 1
    assert stat.S_IMODE(path.stat().st_mode) == 0o644  # warned, not changed behind the user


def test_a_key_in_the_workspace_still_works_with_a_warning(tmp_path, capsys, monkeypatch):
    monkeypatch.delenv("OPENAI_API_KEY")
    write_user_config("llm_model: from-user\nbase_url: http://user\n", 0o600)
    (tmp_path / "autokernel.yaml").write_text(f"openai_api_key: {FILE_KEY}\nllm_model: here\n")
    settings = load_settings(tmp_path)
    # the workspace's file wins over the user's
    assert settings == {"openai_api_key": FILE_KEY, "llm_model": "here", "base_url": "http://user"}
    err = capsys.readouterr().err.strip()
    assert "openai_api_key" in err and str(user_config_path()) in err and "\n" not in err
    assert redact(FILE_KEY) == MASK


def test_settings_that_are_not_keys_draw_no_warning(tmp_path, capsys):
    (tmp_path / "autokernel.yaml").write_text(
        "agent: command\nagent_command: my-agent --token-budget 5\ntimeout_s: 5\nllm_model: m\n"
    )
    load_settings(tmp_path)
    assert capsys.readouterr().err == ""


def test_state_json_keeps_the_last_failure_without_the_key(tmp_path):
    from autokernel.cache import write_json_atomic

    write_json_atomic(tmp_path / "state.json", {"targets": [{"last_failure": leak()}]})
    assert_clean((tmp_path / "state.json").read_text())


@pytest.mark.slow
def test_the_verdict_a_candidate_raises_a_key_in_comes_back_without_it(tmp_path):
    from autokernel.harness.sandbox import Options, evaluate

    path = tmp_path / "kernel.py"
    path.write_text(
        "KERNEL_TYPE = 'reduce'\n"
        "def kernel_fn(x):\n"
        f"    raise RuntimeError('found {KEY} and {KEY[4:]}')\n"
    )
    v = evaluate(path, Options(guards=False, timing=False, compile_baseline=False, seed=1))
    assert v.status is Status.CRASH, v.message
    text = str(v.to_json())
    assert KEY not in text and KEY[4:] not in text and MASK in text, text
