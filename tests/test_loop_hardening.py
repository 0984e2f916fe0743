"""The loop against a hostile or careless night: an agent that never answers usefully, a second
run on the same workspace, a deleted branch, a hand-edited state, a kernel too deep to parse, a
starter that cannot be evaluated. Fast: the stand-in harness of loop_helpers, no interpreter."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from loop_helpers import FakeHarness, ScriptedAgent, invalid, make_loop, reopen, set_config

from autokernel.agents.base import InvalidReply
from autokernel.harness.verdict import Status
from autokernel.loop import RunError
from autokernel.run.lock import LockError, RunLock
from autokernel.run.results import ResultsLog
from autokernel.run.state import STATE_FILE, load
from autokernel.session import RunRequest, SessionError, execute, prepare
from autokernel.views.live import RunView

SPIN_LIMIT = 200  # replies: far past any stop the loop should have made, so a bug fails, not hangs


def git(root: Path, *args: str) -> str:
    return subprocess.run(
        ["git", *args], cwd=root, capture_output=True, text=True, check=True
    ).stdout.strip()


def rows(root: Path) -> list[dict[str, str]]:
    return ResultsLog(root / "results.tsv").read()


class NeverUseful:
    """An agent whose every reply holds no kernel; it gives up loudly after SPIN_LIMIT calls."""

    name = "never"

    def __init__(self) -> None:
        self.calls = 0

    def propose(self, ctx):
        self.calls += 1
        if self.calls > SPIN_LIMIT:
            raise AssertionError(f"the loop asked {self.calls} times without stopping")
        raise InvalidReply("no code block in the reply", 3)


# ---- unusable replies --------------------------------------------------------------------------


def test_unusable_replies_are_experiments_that_max_experiments_counts(tmp_path):
    agent = NeverUseful()
    loop, _ = make_loop(tmp_path, agent=agent, max_experiments=4)
    assert loop.run() == "reached --max-experiments 4"
    got = rows(tmp_path)
    assert [r["status"] for r in got] == ["keep", "invalid", "invalid", "invalid"]
    assert [int(r["experiment"]) for r in got] == [0, 1, 2, 3]
    assert all(r["commit"] == "-" and r["tokens"] == "3" for r in got[1:])
    assert load(tmp_path).next_experiment == 4 and agent.calls == 3


def test_an_agent_that_never_replies_usefully_gets_no_new_round(tmp_path):
    agent = NeverUseful()
    loop, _ = make_loop(tmp_path, agent=agent)  # time left: revisits allowed
    assert loop.run() == "every target is finished"
    state = load(tmp_path)
    assert state.targets[0].rounds == 1 and agent.calls == 5  # the 5-in-a-row rule, once


def test_a_round_with_evaluated_proposals_still_earns_the_next(tmp_path):
    agent = ScriptedAgent([invalid(), set_config(num_warps=4)] + [invalid()] * 4 + [None])
    loop, _ = make_loop(tmp_path, agent=agent)
    loop.run()
    assert load(tmp_path).targets[0].rounds == 2


def test_killed_after_an_invalid_row_resumes_without_repeating_its_number(tmp_path):
    harness = FakeHarness()
    loop, _ = make_loop(tmp_path, harness, agent=ScriptedAgent([invalid()]))
    original = loop.results.append

    def append_then_die(row):
        original(row)
        if row.status == "invalid":
            raise KeyboardInterrupt  # the state still says experiment 1 is next

    loop.results.append = append_then_die
    with pytest.raises(KeyboardInterrupt):
        loop.run()
    assert load(tmp_path).next_experiment == 1
    events = []
    again = reopen(tmp_path, harness, max_experiments=2)
    again.reporter.event = events.append
    again.run()
    numbers = [int(r["experiment"]) for r in rows(tmp_path)]
    assert numbers == [0, 1, 2, 3] and any("repaired" in e for e in events)


def test_rows_cut_from_results_tsv_are_named_on_resume(tmp_path):
    """A row is appended right after its verdict is saved: a verdict without a row means the
    file was cut (by hand, or a damaged disk). The resume says which, and goes on."""
    harness = FakeHarness()
    loop, _ = make_loop(tmp_path, harness, max_experiments=3)
    loop.run()
    tsv = tmp_path / "results.tsv"
    lines = tsv.read_text().splitlines(keepends=True)
    tsv.write_text("".join(lines[:2]))  # the header and experiment 0
    events = []
    again = reopen(tmp_path, harness, max_experiments=1)
    again.reporter.event = events.append
    again.run()
    (warning,) = [e for e in events if "no row" in e]
    assert "experiment(s) 1, 2," in warning and "verdicts" in warning
    assert [int(r["experiment"]) for r in rows(tmp_path)] == [0, 3]


# ---- the workspace lock ------------------------------------------------------------------------


def test_a_second_run_is_refused_naming_the_holder(tmp_path):
    lock = RunLock(tmp_path).acquire()
    try:
        with pytest.raises(LockError, match=f"pid {os.getpid()}"):
            RunLock(tmp_path).acquire()
        req = RunRequest(workspace=tmp_path, kernel="softmax", agent="tuner")
        with pytest.raises(SessionError, match=f"another autokernel run \\(pid {os.getpid()}\\)"):
            prepare(req)
    finally:
        lock.release()
    RunLock(tmp_path).acquire().release()  # released: free again


def test_a_lock_left_by_a_killed_run_does_not_block(tmp_path):
    holder = subprocess.Popen(
        [sys.executable, "-c",
         "import sys, time; from autokernel.run.lock import RunLock; "
         f"RunLock({str(tmp_path)!r}).acquire(); print('held', flush=True); time.sleep(60)"],
        stdout=subprocess.PIPE, text=True, env={**os.environ, "PYTHONPATH": os.getcwd()},
    )  # fmt: skip
    try:
        assert holder.stdout.readline().strip() == "held"
        with pytest.raises(LockError, match=f"pid {holder.pid}"):
            RunLock(tmp_path).acquire()
    finally:
        holder.send_signal(signal.SIGKILL)
        holder.wait()
    assert (tmp_path / ".autokernel" / "run.lock").read_text().strip() == str(holder.pid)
    RunLock(tmp_path).acquire().release()  # the dead holder's file is no obstacle


def test_the_session_releases_the_lock_when_the_run_ends(tmp_path):
    loop, _ = make_loop(tmp_path, max_experiments=1, begin=False)
    loop.lock = RunLock(tmp_path).acquire()
    execute(loop, RunView(tmp_path, quiet=True), resume=False)
    RunLock(tmp_path).acquire().release()


def test_a_full_disk_under_the_state_file_says_so_not_internal_error(tmp_path, monkeypatch):
    """ENOSPC while saving state.json (or a verdict, or the log) is the machine's, not a bug:
    the message says to free space and resume, and the resume loses and repeats nothing."""
    import errno

    import autokernel.loop as loop_module

    real_save, calls = loop_module.save, [0]

    def full_on_the_sixth(state, root):
        calls[0] += 1
        if calls[0] == 6:
            raise OSError(errno.ENOSPC, "No space left on device", str(root / STATE_FILE))
        real_save(state, root)

    monkeypatch.setattr(loop_module, "save", full_on_the_sixth)
    harness = FakeHarness()
    loop, _ = make_loop(tmp_path, harness, max_experiments=4, begin=False)
    with pytest.raises(SessionError) as caught:
        execute(loop, RunView(tmp_path, quiet=True), resume=False)
    message = str(caught.value)
    assert "internal error" not in message and "report" not in message
    assert "No space left on device" in message and "Free space" in message
    assert "autokernel run --resume" in message
    monkeypatch.setattr(loop_module, "save", real_save)
    reopen(tmp_path, harness, max_experiments=2).run()
    numbers = [int(r["experiment"]) for r in rows(tmp_path)]
    assert numbers == list(range(len(numbers))) and len(numbers) >= 3


def test_a_damaged_state_file_does_not_block_a_new_run(tmp_path):
    """Its message says to start a new run; that new run must then start, keeping the file."""
    state_file = tmp_path / STATE_FILE
    state_file.parent.mkdir(parents=True)
    state_file.write_bytes(b"\x8b\x00{half a json")
    with pytest.raises(SessionError, match="without --resume starts a new one"):
        prepare(RunRequest(workspace=tmp_path, resume=True, agent="tuner"))
    loop, _ = prepare(RunRequest(workspace=tmp_path, kernel="softmax", agent="tuner", tag="t2"))
    loop.lock.release()
    assert (tmp_path / ".autokernel" / "state.json.damaged").read_bytes().endswith(b"json")
    assert not state_file.exists()  # the new run writes its own when it begins


# ---- the starter must be evaluable -------------------------------------------------------------


def test_a_starter_that_cannot_be_evaluated_is_an_error_exit(tmp_path):
    harness = FakeHarness()
    base = harness.evaluate

    def evaluate(path, opts=None, on_phase=None):
        verdict = base(path, opts, on_phase)
        verdict.status, verdict.message = Status.CRASH, "CRASH in import: planted for the test"
        return verdict

    loop, _ = make_loop(tmp_path, harness, begin=False)
    loop._evaluate = evaluate
    outcome = execute(loop, RunView(tmp_path, quiet=True), resume=False)
    assert outcome.code == 1
    assert "softmax: CRASH in import: planted for the test" in outcome.error
    assert rows(tmp_path)[0]["status"] == "crash"


# ---- a deleted branch --------------------------------------------------------------------------


def test_a_branch_deleted_mid_run_stops_it_and_resume_says_how_to_restore(tmp_path):
    harness = FakeHarness()
    evaluations = [0]

    def delete_on_third(source):
        evaluations[0] += 1
        if evaluations[0] == 3:
            git(tmp_path, "update-ref", "-d", "refs/heads/autokernel/t1")

    harness.hook = delete_on_third
    loop, _ = make_loop(tmp_path, harness, max_experiments=8)
    with pytest.raises(RunError, match="branch autokernel/t1 was deleted"):
        loop.run()
    head = load(tmp_path).head
    with pytest.raises(RunError, match=f"git branch autokernel/t1 {head[:12]}"):
        reopen(tmp_path, harness, max_experiments=2).run()
    harness.hook = None
    git(tmp_path, "branch", "autokernel/t1", head[:12])  # what the message says to do
    reopen(tmp_path, harness, max_experiments=2).run()
    got = rows(tmp_path)
    assert [int(r["experiment"]) for r in got] == list(range(len(got)))


def test_resume_of_a_deleted_branch_is_a_clear_error(tmp_path):
    loop, _ = make_loop(tmp_path, max_experiments=2)
    loop.run()
    git(tmp_path, "checkout", "-q", "--detach")
    git(tmp_path, "branch", "-D", "autokernel/t1")
    req = RunRequest(workspace=tmp_path, resume=True, agent="tuner")
    with pytest.raises(SessionError, match=r"t1 was deleted.*git branch autokernel/t1 "):
        prepare(req)


# ---- state against results.tsv and refs --------------------------------------------------------


@pytest.mark.slow
def test_a_hand_edited_counter_is_repaired_not_repeated(tmp_path):
    harness = FakeHarness()
    loop, _ = make_loop(tmp_path, harness, max_experiments=5)
    loop.run()
    path = tmp_path / STATE_FILE
    data = json.loads(path.read_text())
    data["next_experiment"] = 1
    path.write_text(json.dumps(data))
    events = []
    again = reopen(tmp_path, harness, max_experiments=3)
    again.reporter.event = events.append
    again.run()
    got = rows(tmp_path)
    numbers = [int(r["experiment"]) for r in got]
    assert numbers == list(range(len(got)))  # no duplicate rows
    assert any("repaired" in e and "continuing at 5" in e for e in events)
    state = load(tmp_path)
    assert git(tmp_path, "rev-parse", "HEAD") == state.head
    reverted = set(git(tmp_path, "for-each-ref", "--format=%(objectname)",
                       "refs/autokernel/attempts/").split())  # fmt: skip
    assert state.head not in reverted


def test_head_left_on_a_reverted_commit_is_moved_back(tmp_path):
    harness = FakeHarness()
    agent = ScriptedAgent([set_config(num_warps=4)])  # slower: reverted
    loop, _ = make_loop(tmp_path, harness, agent=agent, max_experiments=2)
    loop.run()
    attempt = git(tmp_path, "rev-parse", "refs/autokernel/attempts/1")
    kept = load(tmp_path).head
    git(tmp_path, "reset", "-q", "--hard", attempt)  # the branch back on the reverted commit
    path = tmp_path / STATE_FILE
    data = json.loads(path.read_text())
    data["head"] = attempt  # and a state edited to match
    path.write_text(json.dumps(data))
    events = []
    again = reopen(tmp_path, harness, agent=ScriptedAgent([]), max_experiments=1)
    again.reporter.event = events.append
    again.recover()
    assert git(tmp_path, "rev-parse", "HEAD") == kept == load(tmp_path).head
    assert any("repaired: HEAD was experiment 1" in e for e in events)


def test_a_damaged_verdict_is_evaluated_again_without_a_second_row(tmp_path):
    harness = FakeHarness()
    loop, _ = make_loop(tmp_path, harness)
    original = loop.results.append

    def append_then_die(row):
        original(row)
        raise KeyboardInterrupt  # the row is recorded, the state not yet moved on

    loop.results.append = append_then_die
    with pytest.raises(KeyboardInterrupt):
        loop.run()
    n = load(tmp_path).in_flight.experiment
    (tmp_path / ".autokernel" / "verdicts" / f"{n}.json").write_text('{"status": ')  # torn
    reopen(tmp_path, harness, max_experiments=2).run()
    numbers = [int(r["experiment"]) for r in rows(tmp_path)]
    assert numbers == list(range(len(numbers))) and len(numbers) == 3
    assert load(tmp_path).in_flight is None


def test_an_in_flight_record_older_than_the_rows_stops_the_run(tmp_path):
    harness = FakeHarness()
    loop, _ = make_loop(tmp_path, harness, max_experiments=3)
    loop.run()
    path = tmp_path / STATE_FILE
    data = json.loads(path.read_text())
    data["in_flight"] = {"experiment": 1, "target": "softmax", "hypothesis": "x",
                         "agent": "tuner", "tokens": 0, "commit": data["head"],
                         "baseline": False}  # fmt: skip
    path.write_text(json.dumps(data))
    with pytest.raises(RunError, match="older than experiment 2"):
        reopen(tmp_path, harness).run()


# ---- a kernel too deep for Python's parser -----------------------------------------------------

DEEP = "+".join(["1"] * 20000)  # past the parser's depth at any recursion limit


def test_a_kernel_the_harness_cannot_parse_is_a_verdict(tmp_path):
    from autokernel.harness import sandbox

    def deep(source):
        return source + f"\nDEPTH = {DEEP}\n", "a very long sum", 1

    agent = ScriptedAgent([deep])
    loop, _ = make_loop(tmp_path, agent=agent, max_experiments=2)
    loop._evaluate = sandbox.evaluate  # the real static check, which runs before any worker
    loop.run()
    got = rows(tmp_path)
    assert got[1]["status"] == "rejected" and got[1]["correctness"].startswith("REJECTED")
    state = load(tmp_path)
    assert state.in_flight is None and state.next_experiment == 2


def test_an_agent_that_cannot_parse_the_kernel_costs_an_invalid_row(tmp_path):
    agent = ScriptedAgent([RecursionError("maximum recursion depth exceeded")])
    loop, _ = make_loop(tmp_path, agent=agent, max_experiments=2)
    loop.run()
    got = rows(tmp_path)
    assert got[1]["status"] == "invalid" and "RecursionError" in got[1]["description"]


def test_an_interrupted_evaluation_of_an_unparsable_kernel_resumes(tmp_path):
    from autokernel.harness import sandbox

    harness = FakeHarness()
    loop, _ = make_loop(tmp_path, harness)

    def deep(source):
        return source + f"\nDEPTH = {DEEP}\n", "a very long sum", 1

    loop.agent = ScriptedAgent([deep])

    def killed(*args, **kwargs):
        raise KeyboardInterrupt

    loop._evaluate = killed
    with pytest.raises(KeyboardInterrupt):
        loop.run()
    assert load(tmp_path).in_flight is not None
    again = reopen(tmp_path, harness, max_experiments=1)
    again._evaluate = sandbox.evaluate
    again.recover()
    got = rows(tmp_path)
    assert got[-1]["status"] == "rejected" and load(tmp_path).in_flight is None
