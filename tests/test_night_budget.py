"""--hours holds across kills: the time of an evaluation killed before its row (kill -9, power
loss) counts on resume, once, in the sequential and the parallel loop. A kill is a
BaseException raised mid-evaluation, once the heartbeat has written; the resume is a new
process's view from the files on disk, with a clock that only the tests move."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest
from loop_helpers import FakeHarness, make_loop, reopen
from parallel_helpers import FakePool, make_parallel, reopen_parallel

import autokernel.run.night_clock as night_clock
from autokernel.run.results import ResultsLog
from autokernel.run.state import load, new_state, save
from autokernel.targets import single

KILLED_AFTER_S = 2400.0  # the killed evaluation's time: past a half-hour night on its own


class Killed(BaseException):
    pass


def heartbeat(root: Path) -> float:
    try:
        return json.loads((root / ".autokernel" / "heartbeat.json").read_text())["seconds"]
    except (OSError, ValueError, KeyError):
        return -1.0


def killed_on(nth: int, harness: FakeHarness, root: Path):
    """A hook that, on the nth evaluation, spends KILLED_AFTER_S, waits for the heartbeat to
    record it (the thread's work: a kill -9 runs no cleanup), then kills the driver."""
    calls = [0]

    def hook(source: str) -> None:
        calls[0] += 1
        if calls[0] != nth:
            return
        harness.clock[0] += KILLED_AFTER_S
        deadline = time.monotonic() + 5.0
        while heartbeat(root) < harness.clock[0]:
            if time.monotonic() > deadline:
                pytest.fail("no heartbeat recorded the time while the evaluation ran")
            time.sleep(0.01)
        raise Killed

    return hook


@pytest.fixture(autouse=True)
def fast_heartbeat(monkeypatch):
    monkeypatch.setattr(night_clock, "HEARTBEAT_S", 0.02)


def numbers(root: Path) -> list[int]:
    return [int(r["experiment"]) for r in ResultsLog(root / "results.tsv").read()]


def test_a_killed_evaluation_counts_against_hours_once(tmp_path):
    harness = FakeHarness()
    loop, _ = make_loop(tmp_path, harness, hours=0.5)  # experiment 0, the starter, at t=0
    harness.hook = killed_on(1, harness, tmp_path)
    with pytest.raises(Killed):
        loop.run()
    assert load(tmp_path).seconds == 0.0  # no row, no charge: only the heartbeat knows
    events: list[str] = []
    resumed = reopen(tmp_path, FakeHarness(clock=harness.clock), max_experiments=5)
    resumed.reporter.event = events.append
    assert resumed.run() == "the --hours budget (0.5 h) is spent"
    assert numbers(tmp_path) == [0, 1]  # the interrupted one finished; nothing new started
    state = load(tmp_path)
    assert state.seconds == KILLED_AFTER_S  # counted, and counted once
    assert state.targets[0].seconds == state.targets[0].round_seconds == KILLED_AFTER_S
    assert any("40.0 min" in e and "--hours" in e for e in events)
    again = reopen(tmp_path, FakeHarness(clock=harness.clock), max_experiments=5)
    assert again.run() == "the --hours budget (0.5 h) is spent"
    assert load(tmp_path).seconds == KILLED_AFTER_S and numbers(tmp_path) == [0, 1]


def test_a_killed_parallel_evaluation_counts_against_hours_once(tmp_path):
    harness = FakeHarness()
    loop, _ = make_parallel(tmp_path, FakePool(harness, slots=2), begin=False)
    loop.state.hours = 0.5
    loop.begin()
    harness.hook = killed_on(1, harness, tmp_path)
    with pytest.raises(Killed):
        loop.run()
    proposed = load(tmp_path).next_experiment
    pool = FakePool(FakeHarness(clock=harness.clock), slots=2)
    resumed = reopen_parallel(tmp_path, pool, max_experiments=8)
    assert resumed.run() == "the --hours budget (0.5 h) is spent"
    # what was proposed before the kill is written; nothing is proposed after it
    assert numbers(tmp_path) == list(range(proposed))
    assert load(tmp_path).seconds == KILLED_AFTER_S
    again = reopen_parallel(tmp_path, pool, max_experiments=8)
    assert again.run() == "the --hours budget (0.5 h) is spent"
    assert load(tmp_path).seconds == KILLED_AFTER_S and numbers(tmp_path) == list(range(proposed))


def test_another_runs_heartbeat_counts_for_nothing(tmp_path):
    """A run started after one that was killed (the same tag, its branch deleted) must not
    inherit the killed run's time."""
    old = new_state("t1", "tuner", 1.0, [single("softmax")])
    new = new_state("t1", "tuner", 1.0, [single("softmax")])
    save(new, tmp_path)
    (tmp_path / ".autokernel" / "heartbeat.json").write_text(
        json.dumps({"run": old.run_id, "seconds": 3000.0})
    )
    assert night_clock.recorded_seconds(new, tmp_path) == 0.0
    assert night_clock.recorded_seconds(old, tmp_path) == 3000.0
