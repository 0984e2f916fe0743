"""Bad options and plan.yaml values are one-line errors before anything starts: exit 2, no
traceback, nothing written to git. In-process through Typer's runner, so each case is fast."""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

from autokernel.cli import app
from autokernel.session import Outcome
from autokernel.targets import TargetError, from_plan

runner = CliRunner()


def invoke(*args: str):
    result = runner.invoke(app, list(args))
    assert not isinstance(result.exception, Exception) or isinstance(
        result.exception, SystemExit
    ), repr(result.exception)  # a traceback, not a message
    return result


@pytest.mark.parametrize(
    "args,message",
    [
        (["--hours", "nan"], "--hours must be a positive number"),
        (["--hours", "inf"], "--hours must be a positive number"),
        (["--hours", "-1"], "--hours must be a positive number"),
        (["--max-experiments", "0"], "--max-experiments must be 1 or more"),
        (["--max-experiments", "-1"], "--max-experiments must be 1 or more"),
        (["--max-tokens", "0"], "--max-tokens must be 1 or more"),
        (["--timeout", "-5"], "--timeout must be a positive number"),
        (["--timeout", "nan"], "--timeout must be a positive number"),
        (["--plan", "no-such-plan.yaml"], "no such file"),
        (["--plan", "."], "is a directory"),
        (["--tag", "bad tag/x"], "invalid --tag"),
        (["--tag", "a..b"], "invalid --tag"),
        (["--tag", "x.lock"], "invalid --tag"),
    ],
)
def test_bad_run_options_are_refused_before_anything_starts(tmp_path, args, message):
    ws = tmp_path / "ws"
    result = invoke("run", "--kernel", "softmax", *args, "--workspace", str(ws))
    assert result.exit_code == 2, result.output
    assert message in result.output
    assert not ws.exists()  # nothing created, no lock, no repository


def test_a_file_as_workspace_is_a_message(tmp_path):
    afile = tmp_path / "notes.txt"
    afile.write_text("mine\n")
    for command in (["run", "--kernel", "softmax"], ["status"]):
        result = invoke(*command, "--workspace", str(afile))
        assert result.exit_code == 2, result.output
        assert "is a file: give a directory" in result.output
    assert afile.read_text() == "mine\n"


@pytest.mark.parametrize(
    "args,message",
    [
        (["--timeout", "-5"], "--timeout must be a positive number"),
        (["--json", "{tmp}/missing/v.json"], "does not exist"),
        (["--json", "{tmp}"], "is a directory"),
    ],
)
def test_bad_bench_options_are_refused_before_evaluating(tmp_path, args, message):
    args = [a.replace("{tmp}", str(tmp_path)) for a in args]
    result = invoke("bench", "--kernel", "softmax", "--quick", *args)
    assert result.exit_code == 2, result.output
    assert message in " ".join(result.output.split())  # the terminal may wrap a long path
    assert "evaluating" not in result.output


def test_a_second_run_on_a_workspace_exits_2_naming_the_holder(tmp_path):
    import os

    from autokernel.run.lock import RunLock

    lock = RunLock(tmp_path).acquire()
    try:
        result = invoke("run", "--kernel", "softmax", "--workspace", str(tmp_path))
    finally:
        lock.release()
    assert result.exit_code == 2, result.output
    text = " ".join(result.output.split())
    assert f"another autokernel run (pid {os.getpid()}) is using {tmp_path}" in text
    assert not (tmp_path / ".git").exists()  # refused before touching anything


def test_a_failed_starter_exits_non_zero_with_the_verdict(tmp_path, monkeypatch):
    """The CLI's side of the session's Outcome: the error on stderr, its exit code."""
    import autokernel.session as session
    from autokernel.run.state import new_state

    state = new_state("t", "tuner", 1.0, [])
    monkeypatch.setattr(session, "prepare", lambda req: (None, None))
    monkeypatch.setattr(
        session,
        "execute",
        lambda loop, view, resume: Outcome(
            "every target is finished", state, 1, "softmax: CRASH in import: planted"
        ),
    )
    result = invoke("run", "--kernel", "softmax", "--workspace", str(tmp_path))
    assert result.exit_code == 1
    assert "error: softmax: CRASH in import: planted" in " ".join(result.output.split())


# ---- plan.yaml ---------------------------------------------------------------------------------


def plan(tmp_path: Path, body: str) -> Path:
    path = tmp_path / "plan.yaml"
    path.write_text("targets:\n" + body)
    return path


@pytest.mark.parametrize(
    "entry,message",
    [
        ("- {kernel_type: softmax, name: 'a/b'}", "cannot name the file"),
        ("- {kernel_type: softmax, name: '..'}", "cannot name the file"),
        ("- {kernel_type: softmax, name: '" + "x" * 200 + "'}", "cannot name the file"),
        ("- {kernel_type: softmax, name: [1, 2]}", "cannot name the file"),
        ("- {kernel_type: softmaxx}", "kernel_type 'softmaxx' is not one of"),
        ("- 7", "expected a mapping"),
        ("- {kernel_type: softmax, share: lots}", "share must be a number"),
        ("- {kernel_type: softmax, share: .nan}", "share must be a number"),
        ("- {kernel_type: softmax, share: -0.5}", "share must be a number"),
        ("- {kernel_type: softmax, share: 3}", "at most 1"),
        ("- {kernel_type: softmax, calls: many}", "calls must be"),
        ("- {kernel_type: softmax, calls: 1.5}", "calls must be a whole number"),
        ("- {kernel_type: softmax, ms: fast}", "ms must be a number"),
        ("- {kernel_type: softmax, args: 5}", "args must be a mapping"),
        ("- {kernel_type: softmax, args: {causal: maybe}}", "causal must be true or false"),
        ("- {kernel_type: flash_attention, args: {mask: 3}}", "mask must be 0, 1 (padding)"),
        ("- {kernel_type: softmax, dtype: 5}", "dtype must be a name"),
        ("- {kernel_type: softmax, dtype: float8}", "unknown dtype"),
        ("- {kernel_type: softmax, shapes: '64x1024'}", "shapes must be a list"),
        ("- {kernel_type: softmax, shapes: ['64xlots']}", "64xlots"),
        ("- {kernel_type: softmax, shapes: [{rows: 0, cols: 4}]}", "must be positive"),
        ("- {kernel_type: softmax, shapes: [[64, 1024]]}", "must be a mapping"),
    ],
)
def test_every_plan_value_is_checked_with_a_one_line_error(tmp_path, entry, message):
    with pytest.raises(TargetError) as info:
        from_plan(plan(tmp_path, entry + "\n"))
    text = str(info.value)
    assert message in text and "\n" not in text and "target 1" in text


def test_a_good_plan_loads_as_written(tmp_path):
    targets = from_plan(
        plan(
            tmp_path,
            "- {kernel_type: softmax, name: softmax, share: 0.6, calls: 2, ms: 1.5,\n"
            "   shapes: ['64x1024'], dtype: float32}\n"
            "- {kernel_type: softmax, share: 0.4, ms: 0}\n",
        )
    )
    assert [t.name for t in targets] == ["softmax", "softmax_1"]
    assert targets[0].calls == 2 and targets[0].share == 0.6 and targets[0].model_ms == 1.5
    assert targets[0].shapes == ({"rows": 64, "cols": 1024},) and targets[1].model_ms is None


def test_a_bad_plan_is_a_cli_message_not_a_traceback(tmp_path):
    ws = tmp_path / "ws"
    ws.mkdir()
    plan(ws, "- {kernel_type: softmax, name: 'ok/../../escape', share: 0.5}\n")
    result = invoke("run", "--workspace", str(ws))
    assert result.exit_code == 2, result.output
    assert "cannot name the file" in result.output and not (ws / ".git").exists()
