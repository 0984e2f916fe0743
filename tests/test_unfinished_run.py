"""`autokernel run` without --resume where the workspace's run is unfinished is refused: a new
run replaces the state file, so a forgotten --resume would end the old run's resume (its
experiment cut short, its queue, its budget). `--new` says so on purpose; a finished run is
simply followed. In-process through prepare() and Typer's runner: no evaluation runs."""

from __future__ import annotations

from pathlib import Path

import pytest
from loop_helpers import FakeHarness, Killed, git, make_loop
from typer.testing import CliRunner

import autokernel.session as session
from autokernel.cli import app
from autokernel.run.results import ResultsLog
from autokernel.session import RunRequest, SessionError, prepare


def killed_mid_evaluation(root: Path) -> None:
    """A run killed while experiment 1 was evaluated: in flight, committed, no row."""
    harness = FakeHarness()
    loop, _ = make_loop(root, harness)

    def kill(source: str) -> None:
        raise Killed

    harness.hook = kill
    with pytest.raises(Killed):
        loop.run()


def snapshot(root: Path) -> tuple:
    """What a refusal must leave as it was: the state, the rows, the branches."""
    state = (root / ".autokernel" / "state.json").read_bytes()
    rows = ResultsLog(root / "results.tsv").read()
    return state, rows, git(root, "for-each-ref", "--format=%(refname) %(objectname)")


def test_a_new_run_over_a_killed_one_is_refused_and_changes_nothing(tmp_path):
    killed_mid_evaluation(tmp_path)
    before = snapshot(tmp_path)
    with pytest.raises(SessionError) as caught:
        prepare(RunRequest(workspace=tmp_path, kernel="softmax", agent="tuner", tag="t2"))
    message = str(caught.value)
    assert "run t1" in message and "experiment 1 was cut short" in message
    assert "autokernel run --resume" in message and "autokernel run --new" in message
    assert "\n" not in message
    assert snapshot(tmp_path) == before
    loop, _ = prepare(RunRequest(workspace=tmp_path, resume=True, agent="tuner"))
    loop.lock.release()  # refused, and the lock given back: the run still resumes


@pytest.mark.parametrize(
    "hours,per_eval,refused",
    [(10.0, 0.0, True), (0.5, 600.0, False)],
    ids=["max-experiments-with-hours-left", "hours-spent"],
)
def test_a_run_with_budget_left_is_unfinished_a_spent_one_is_not(tmp_path, hours, per_eval,
                                                                  refused):  # fmt: skip
    harness = FakeHarness(seconds_per_eval=per_eval)
    loop, _ = make_loop(tmp_path, harness, hours=hours, max_experiments=4)
    loop.run()
    req = RunRequest(workspace=tmp_path, kernel="softmax", agent="tuner", tag="t2")
    if refused:
        with pytest.raises(SessionError, match=r"unfinished \(\d+ min of its 10 h left\)"):
            prepare(req)
    else:
        prepare(req)[0].lock.release()


def test_new_starts_another_run_and_leaves_the_old_ones_branch_and_rows(tmp_path):
    killed_mid_evaluation(tmp_path)
    rows = ResultsLog(tmp_path / "results.tsv").read()
    old_head = git(tmp_path, "rev-parse", "autokernel/t1")
    req = RunRequest(workspace=tmp_path, kernel="softmax", agent="tuner", tag="t2", new=True)
    loop, _ = prepare(req)
    loop.lock.release()
    # experiment 1 has no row, but its commit says "exp 1": the new run does not reuse it
    assert loop.state.tag == "t2" and loop.state.next_experiment == 2
    assert git(tmp_path, "rev-parse", "autokernel/t1") == old_head
    assert ResultsLog(tmp_path / "results.tsv").read() == rows
    log = (tmp_path / ".autokernel" / "run.log").read_text()
    assert "the unfinished run t1 stays on its branch" in log


def test_the_cli_refuses_with_exit_2_and_one_line(tmp_path, monkeypatch):
    killed_mid_evaluation(tmp_path)
    monkeypatch.setattr(session, "execute", lambda *a: pytest.fail("a new run was started"))
    result = CliRunner().invoke(app, ["run", "--kernel", "softmax", "--workspace", str(tmp_path)])
    assert result.exit_code == 2, result.output
    text = " ".join(result.output.split())
    assert "is unfinished" in text and "--resume" in text and "Traceback" not in text
    both = CliRunner().invoke(app, ["run", "--resume", "--new", "--workspace", str(tmp_path)])
    assert both.exit_code == 2 and "pass one of them" in " ".join(both.output.split())
