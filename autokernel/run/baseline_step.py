"""Experiments that measure a kernel already chosen rather than an agent's proposal: the shipped
starter that opens a target (the first one also creates the run's branch), and a revisit's
re-measure of the target's best kernel, so keep and revert compare against a fresh figure.
"""

from __future__ import annotations

from autokernel import backends
from autokernel.run import briefing
from autokernel.run.driver import Driver
from autokernel.run.state import InFlight, TargetState


def _starter(loop: Driver, ts: TargetState) -> tuple[str, str]:
    return briefing.target_starter(ts.target, backends.start_backend(loop.state.backend))


def begin(loop: Driver) -> None:
    """Create the branch by committing the first target's starter, recorded as in flight
    first so that even this step survives a kill."""
    ts = loop.active()
    if ts is None:
        return
    s = loop.state
    n = s.next_experiment
    source, hypothesis = _starter(loop, ts)
    s.in_flight = InFlight(n, ts.name, hypothesis, "starter", 0, baseline=True)
    loop.save()
    sha = loop.ws.start(s.tag, source, f"exp {n} [{ts.name}]: {hypothesis}")
    s.in_flight.commit = s.head = sha
    loop.save()
    loop.reporter.event(f"branch {loop.ws.branch} created; exp {n} [{ts.name}] {sha[:8]}")
    loop.evaluate_in_flight()


def start_target(loop: Driver, ts: TargetState) -> None:
    """Experiment N of a new target: the shipped starter, committed and measured as is."""
    source, hypothesis = _starter(loop, ts)
    loop.commit(ts, source, hypothesis, agent="starter", tokens=0, baseline=True)
    loop.evaluate_in_flight()


def rebase_target(loop: Driver, ts: TargetState) -> None:
    """A revisit's first step: the target's best kernel back in kernel.py, re-measured, so
    that keep and revert compare against a fresh figure and never rewind other targets."""
    if ts.best_commit is None:
        ts.rebase = False
        start_target(loop, ts)
        return
    source = loop.ws.show(ts.best_commit)
    if source == loop.ws.kernel_path.read_text():  # nothing happened in between: go on
        ts.best_commit, ts.rebase = loop.ws.head(), False
        loop.save()
        return
    hypothesis = f"round {ts.rounds}: the best {ts.name} kernel so far, re-measured"
    loop.commit(ts, source, hypothesis, "best", 0, baseline=True)
    loop.evaluate_in_flight()
