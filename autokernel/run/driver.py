"""What the steps of a run (recovery.py, baseline_step.py) need of the loop that drives them:
its records and the few moves they make through it. A Protocol, so that those steps sit below
the loop (autokernel.loop, autokernel.parallel) instead of importing it back.
"""

from __future__ import annotations

from pathlib import Path
from typing import Protocol

from autokernel.harness.verdict import Verdict
from autokernel.run.results import ResultsLog
from autokernel.run.state import State, TargetState
from autokernel.run.workspace import Workspace


class Events(Protocol):
    def event(self, message: str) -> None: ...


class Driver(Protocol):
    """The sequential loop (autokernel.loop.Loop) as its steps see it."""

    ws: Workspace
    state: State
    results: ResultsLog
    reporter: Events

    def save(self) -> None: ...
    def active(self) -> TargetState | None: ...
    def commit(
        self, ts: TargetState, source: str, hypothesis: str, agent: str, tokens: int,
        baseline: bool = False,
    ) -> None: ...  # fmt: skip
    def evaluate_in_flight(self, recorded: dict[str, str] | None = None) -> None: ...
    def conclude(self, verdict: Verdict, recorded: dict[str, str] | None = None) -> None: ...
    def finish(self, ts: TargetState, reason: str, final: bool = False) -> None: ...
    def verdict_path(self, n: int) -> Path: ...


class QueueDriver(Driver, Protocol):
    """The parallel loop (autokernel.parallel.ParallelLoop): proposals queued by number."""

    def write_invalid(self, e: dict, recorded: bool = False) -> None: ...
    def pending_path(self, n: int) -> Path: ...
