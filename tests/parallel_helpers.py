"""A stand-in pool for the parallel loop's tests: slots that evaluate with FakeHarness at once
but report back in a scripted order, lose jobs on request, and may time slower than the rest.

No processes and no Ray, so the ordering, keep and recovery logic is tested in milliseconds;
tests/test_parallel_run.py drives the real workers end to end.
"""

from __future__ import annotations

import tempfile
from collections.abc import Callable
from pathlib import Path

from loop_helpers import FakeHarness

from autokernel.agents.tuner import Tuner, read_config
from autokernel.eval_job import COMPARE, Job
from autokernel.harness.interleave import Comparison
from autokernel.loop import Settings
from autokernel.orchestrate import Rules
from autokernel.parallel import ParallelLoop
from autokernel.pool import DONE, LOST, Event
from autokernel.run.results import ResultsLog
from autokernel.run.state import load, new_state
from autokernel.run.workspace import Workspace
from autokernel.targets import Target, single


class FakePool:
    """`order`: "fifo" reports the oldest job first; "mixed" the newest and the oldest in turn,
    so later experiments often finish first and no job waits forever.
    `lose(slot, job)` -> True loses that job; `slow` scales a slot's timings."""

    def __init__(
        self,
        harness: FakeHarness,
        slots: int = 2,
        order: str = "mixed",
        lose: Callable[[str, Job], bool] | None = None,
        slow: dict[str, float] | None = None,
        compare_ratio: float | None = None,
    ) -> None:
        self.harness, self.order, self.lose = harness, order, lose
        self.slots = [f"f{i}" for i in range(slots)]
        self.on_gpu = True
        self.slow = slow or {}
        self.compare_ratio = compare_ratio  # None: the true ratio of the two configs' speeds
        self.running: list[tuple[str, Job]] = []
        self.submitted: list[tuple[str, str]] = []  # (slot, key)
        self.compared: list[str] = []  # slots that ran an interleaved comparison
        self._newest = True

    def where(self, slot: str) -> str:
        return f"fake {slot}"

    def submit(self, slot: str, job: Job, deadline_s: float) -> None:
        assert all(s != slot for s, _ in self.running), f"{slot} got two jobs at once"
        self.running.append((slot, job))
        self.submitted.append((slot, job.key))

    def wait(self, timeout_s: float) -> list[Event]:
        if not self.running:
            return []
        newest = self.order == "mixed" and self._newest
        self._newest = not self._newest
        slot, job = self.running.pop(-1 if newest else 0)
        if self.lose and self.lose(slot, job):
            return [Event(slot, job.key, LOST, text=f"worker {slot} exited (-9)")]
        return [Event(slot, job.key, DONE, result=self._result(slot, job))]

    def _result(self, slot: str, job: Job) -> dict:
        if job.kind == COMPARE:
            self.compared.append(slot)
            best, cand = (self.harness.speed(read_config(s)[0]) for s in job.sources)
            ratio = self.compare_ratio if self.compare_ratio is not None else best / cand
            return {"comparison": Comparison(ratio=ratio, noise=0.005).to_json()}
        with tempfile.TemporaryDirectory() as d:
            path = Path(d) / "kernel.py"
            path.write_text(job.sources[0])
            verdict = self.harness.evaluate(path)
        factor = self.slow.get(slot, 1.0)
        for t in verdict.timings:
            t.us *= factor
            t.spread_us *= factor
            t.pct_peak /= factor
            t.speedup_vs_eager /= factor
        return {"verdict": verdict.to_json()}

    def close(self) -> None:
        pass


def make_parallel(
    root: Path,
    pool: FakePool | None = None,
    agent=None,
    max_experiments: int | None = None,
    rules: Rules | None = None,
    targets: list[Target] | None = None,
    begin: bool = True,
    harness: FakeHarness | None = None,
) -> tuple[ParallelLoop, FakePool]:
    harness = harness or (pool.harness if pool else FakeHarness())
    harness.clock = harness.clock or [0.0]
    pool = pool or FakePool(harness)
    ws = Workspace.open(root)
    state = new_state("t1", "x", 10.0, targets or [single("softmax")])
    loop = _loop(ws, state, agent, root, pool, max_experiments, rules)
    if begin:
        loop.begin()
    return loop, pool


def reopen_parallel(
    root: Path, pool: FakePool, agent=None, max_experiments=None, rules=None
) -> ParallelLoop:
    """A new driver process's view: state from disk, branch checked out again."""
    state = load(root)
    assert state is not None
    ws = Workspace.open(root)
    if ws.branch != f"autokernel/{state.tag}":
        ws.resume(state.tag)
    return _loop(ws, state, agent, root, pool, max_experiments, rules)


def _loop(ws, state, agent, root, pool, max_experiments, rules) -> ParallelLoop:
    clock = pool.harness.clock
    return ParallelLoop(
        ws, state, agent or Tuner(), ResultsLog(root / "results.tsv"),
        Settings(on_gpu=True, max_experiments=max_experiments, rules=rules or Rules()),
        pool=pool, clock=lambda: clock[0],
    )  # fmt: skip
