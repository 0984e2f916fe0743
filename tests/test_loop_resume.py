"""A run killed at any instant resumes with no row lost or repeated and the tree at the last
kept commit. Each case kills the loop (a BaseException, as SIGKILL would, with no cleanup) at one
point of an experiment, then resumes it as a new process would: from the files on disk."""

from __future__ import annotations

import errno
from pathlib import Path

import pytest
from loop_helpers import FakeHarness, Killed, git, make_loop, reopen

from autokernel.loop import RunError
from autokernel.orchestrate import Rules
from autokernel.run.results import ResultsLog
from autokernel.run.state import load


def kill_at(obj: object, method: str, when: str, nth: int) -> None:
    """Make obj.method raise Killed on its nth call, before or after doing its work."""
    original = getattr(obj, method)
    calls = [0]

    def wrapped(*args, **kwargs):
        calls[0] += 1
        if calls[0] == nth and when == "before":
            raise Killed
        result = original(*args, **kwargs)
        if calls[0] == nth and when == "after":
            raise Killed
        return result

    setattr(obj, method, wrapped)


def check_consistent(root: Path) -> list[dict[str, str]]:
    rows = ResultsLog(root / "results.tsv").read()
    numbers = [int(r["experiment"]) for r in rows]
    assert numbers == list(range(len(rows))), numbers  # none lost, none repeated
    state = load(root)
    assert state.in_flight is None and state.finishing is None
    assert git(root, "rev-parse", "HEAD") == state.head
    assert git(root, "status", "--porcelain") == ""  # kernel.py is HEAD's
    for r in rows:
        git(root, "rev-parse", "--verify", r["commit"] + "^{commit}")
        if r["status"] != "keep":
            assert git(root, "rev-parse", f"refs/autokernel/attempts/{r['experiment']}")
    assert state.next_experiment == len(rows)
    return rows


POINTS = [
    ("ws", "commit_kernel", "before"),
    ("ws", "commit_kernel", "after"),
    ("harness", "hook", "before"),
    ("results", "append", "before"),
    ("results", "append", "after"),
    ("ws", "revert", "after"),
    ("ws", "save_optimized", "before"),
    ("ws", "save_optimized", "after"),
]


@pytest.mark.slow
@pytest.mark.parametrize("where,method,when", POINTS, ids=[f"{m}-{w}" for _, m, w in POINTS])
def test_killed_anywhere_resumes_without_losing_or_repeating(tmp_path, where, method, when):
    rules = Rules(max_reverts=2)  # the tuner's first two moves are slower: a target finishes
    harness = FakeHarness()
    harness.hook = lambda source: None
    loop, _ = make_loop(tmp_path, harness, rules=rules)
    target = {"ws": loop.ws, "results": loop.results, "harness": harness}[where]
    kill_at(target, method, when, nth=1 if method in ("revert", "save_optimized") else 2)
    with pytest.raises(Killed):
        loop.run()
    resumed = reopen(tmp_path, FakeHarness(clock=harness.clock), rules=rules, max_experiments=3)
    resumed.run()
    rows = check_consistent(tmp_path)
    assert len(rows) >= 3
    state = load(tmp_path)
    if state.targets[0].status == "done":
        assert (tmp_path / "optimized" / "softmax.py").exists()


def test_disk_full_stops_with_a_message_and_resume_records_the_row_once(tmp_path):
    harness = FakeHarness()
    loop, _ = make_loop(tmp_path, harness)
    original = loop.results.append
    calls = [0]

    def full(row):
        calls[0] += 1
        if calls[0] == 2:
            raise OSError(errno.ENOSPC, "No space left on device")
        return original(row)

    loop.results.append = full
    with pytest.raises(RunError, match="Free space"):
        loop.run()
    assert load(tmp_path).in_flight is not None
    reopen(tmp_path, harness, max_experiments=2).run()
    rows = check_consistent(tmp_path)
    assert [r["experiment"] for r in rows] == ["0", "1", "2", "3"]
