"""Running jobs on the slots for the parallel loop: handing out evaluations (and, per target
visit, a calibration of the current best on each slot), collecting what the slots report,
and synchronous calls (a starter, an interleaved comparison) that wait for one job while
recording every other event. Nothing here writes an experiment: parallel.py does, in order.

A mix-in of ParallelLoop: it works on the loop's state, board, pool and reporter.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import TYPE_CHECKING, Any

from autokernel.eval_job import COMPARE, EVALUATE, Job, options_dict
from autokernel.harness.interleave import Comparison
from autokernel.harness.sandbox import BASELINE_ALLOWANCE_S
from autokernel.harness.verdict import Check, Status, Verdict
from autokernel.pool import DEADLINE_MARGIN_S, DONE, PHASE, STARTED, Event
from autokernel.run.keep_rule import score
from autokernel.run.parallel_keep import Calibration
from autokernel.run.slot_board import Visit, calibration_key, parse_calibration_key
from autokernel.run.state import Queued, TargetState

if TYPE_CHECKING:
    from collections.abc import Callable

    from autokernel.loop import Loop
    from autokernel.pool import Pool
    from autokernel.run.proposals import Proposer, Ticket
    from autokernel.run.slot_board import SlotBoard
    from autokernel.run.worker_log import WorkerLog

    _Base = Loop
else:
    _Base = object

WAIT_S = 0.25  # one wait for events: Ctrl-C, the budget and agent replies are seen this often
MAX_LOSSES = 3  # workers lost on one experiment before it is recorded as the candidate's crash
EXP = "exp "  # job key prefix of an experiment's evaluation


class SlotJobs(_Base):
    # Set or defined by ParallelLoop (parallel.py), which mixes this in; named here, not
    # imported from it, so that parallel.py alone imports the other.
    pool: Pool
    board: SlotBoard
    wlog: WorkerLog
    proposer: Proposer
    _calls: int
    _answers: dict[str, Event]
    _prefer: str | None
    _visit: Callable[[], Visit | None]
    _arrived: Callable[[Ticket], None]
    pending_path: Callable[[int], Path]
    # Set by ParallelLoop: time the best on every slot (GPU runs: interpreter figures on the
    # CPU say nothing about a GPU's speed).
    _calibrate: bool = False

    def _options_json(self, ts: TargetState) -> dict[str, Any]:
        return options_dict(self._options(ts))

    def _dispatch(self) -> None:
        """Hand waiting experiments to free slots, lowest number first (the writer waits for
        it); a slot that has not timed this visit's best kernel yet does that first."""
        ts, visit = self.state.active(), self._visit()
        for slot in self.board.free(visit):
            e = next((e for e in self.state.queue if self._waiting(e)), None)
            if e is None:
                return
            if self._calibrate and ts and visit and ts.best_commit:
                if self.board.needs_calibration(slot, visit):
                    best = self.ws.show(ts.best_commit)
                    job = Job(calibration_key(visit), EVALUATE, [best], self._options_json(ts))
                    self._submit(slot, job)
                    continue
            source = self.pending_path(e.experiment).read_text()
            opts = self._options_json(self.state.target(e.target))
            e.worker = slot
            self._submit(slot, Job(f"{EXP}{e.experiment}", EVALUATE, [source], opts))

    def _waiting(self, e: Queued) -> bool:
        """Not evaluated, and on no slot now (a slot named from a killed run's state, or one
        whose job was lost, does not count)."""
        if e.evaluated:
            return False
        running = self.board.busy.get(e.worker or "")
        return running is None or running[0] != f"{EXP}{e.experiment}"

    def _submit(self, slot: str, job: Job) -> None:
        self.board.take(slot, job.key)
        deadline = self.settings.timeout_s + BASELINE_ALLOWANCE_S + DEADLINE_MARGIN_S
        self.pool.submit(slot, job, deadline)
        self.reporter.worker(slot, f"{job.key}: evaluating")

    def _pump(self, timeout_s: float) -> None:
        """Collect agent replies and slot events; records them, never writes an experiment."""
        for ticket in self.proposer.poll():
            self._arrived(ticket)
        for ev in self.pool.wait(timeout_s):
            self._on_event(ev)

    def _on_event(self, ev: Event) -> None:
        if ev.kind == STARTED:
            self.wlog.append(ev.slot, "started", where=ev.text)
            self.reporter.event(f"worker {ev.slot}: {ev.text}")
            return
        if ev.kind == PHASE:
            self.reporter.worker(ev.slot, f"{ev.key}: {ev.text}")
            return
        key, seconds = self.board.release(ev.slot)
        key = key or ev.key
        self.reporter.worker(ev.slot, "idle")
        n = int(key[len(EXP) :]) if key.startswith(EXP) else None
        self.wlog.append(ev.slot, ev.kind, key=key, experiment=n, seconds=round(seconds, 3),
                         **({"why": ev.text} if ev.kind != DONE else {}))  # fmt: skip
        if ev.kind != DONE:
            self.board.forget(ev.slot)
        visit = parse_calibration_key(key)
        if n is not None:
            self._evaluated(n, ev)
        elif visit is not None:
            self._calibrated(visit, ev)
        else:
            self._answers[key] = ev

    def _evaluated(self, n: int, ev: Event) -> None:
        e = next((e for e in self.state.queue if e.experiment == n), None)
        if e is None:
            return
        if ev.kind == DONE:
            verdict = Verdict.from_json(ev.result["verdict"])  # type: ignore[index]
        else:
            e.lost.append(ev.text)
            e.worker = None
            if len(e.lost) < MAX_LOSSES:
                self.reporter.event(f"exp {n}: {ev.text}; it goes back to the queue")
                self.save()
                return
            verdict = _lost_verdict(e.lost)
        verdict.file = str(self.ws.kernel_path)
        path = self.verdict_path(n)
        path.parent.mkdir(parents=True, exist_ok=True)
        verdict.write(path)
        e.evaluated, e.worker = True, ev.slot
        self.save()

    def _calibrated(self, visit: Visit, ev: Event) -> None:
        if ev.kind != DONE:
            return  # lost: the slot is checked again on its next turn
        ts = self.state.target(visit[0])
        verdict = Verdict.from_json(ev.result["verdict"])  # type: ignore[index]
        got = score(verdict, ts.target.labels() or None) if verdict.status is Status.PASS else None
        reading = Calibration(ev.slot, got.us if got else None, got.spread if got else 0.0)
        self.wlog.append(ev.slot, "calibrated", target=visit[0], us=reading.us)
        for change in self.board.record(visit, reading):
            self.wlog.append(change.slot, change.status, note=change.note, target=visit[0])
            if change.status != "ok" or change.ratio is not None:
                self.reporter.event(f"worker {change.slot} [{visit[0]}]: {change.note}")

    def _call(self, job: Job, slot: str | None = None) -> Event:
        """Run one job now (a starter, an interleaved comparison) and wait for it, recording
        every other event meanwhile; a lost worker is replaced by another slot."""
        ev = Event("", job.key, "lost", text="never ran")
        for _ in range(MAX_LOSSES):
            while True:
                free = self.board.free(self._visit())
                chosen = slot if slot in free else (free[0] if free and slot is None else None)
                if chosen is not None:
                    break
                if slot is not None and slot not in self.board.usable(self._visit()):
                    slot = None  # quarantined meanwhile: any slot will do
                self._pump(WAIT_S)
            self._calls += 1
            key = f"call{self._calls}:{job.key}"
            self._submit(chosen, dataclasses.replace(job, key=key))
            while key not in self._answers:
                self._pump(WAIT_S)
            ev = self._answers.pop(key)
            if ev.kind == DONE:
                return ev
            self.reporter.event(f"{job.key}: {ev.text}; running it on another slot")
            slot = None
        return ev

    def _evaluate_on_pool(self, path: Path, opts: Any, on_phase: Any = None) -> Verdict:
        ev = self._call(Job("evaluate", EVALUATE, [Path(path).read_text()], options_dict(opts)))
        if ev.kind != DONE:
            return _lost_verdict([ev.text])
        verdict = Verdict.from_json(ev.result["verdict"])  # type: ignore[index]
        verdict.file = str(path)
        return verdict

    def _compare_on_pool(self, best: Path, candidate: Path, opts: Any, **_: Any) -> Comparison:
        sources = [Path(best).read_text(), Path(candidate).read_text()]
        ev = self._call(Job("compare", COMPARE, sources, options_dict(opts)), self._prefer)
        if ev.kind != DONE:
            return Comparison(error=f"{MAX_LOSSES} workers lost while comparing: {ev.text}")
        return Comparison.from_json(ev.result["comparison"])  # type: ignore[index]


def _lost_verdict(why: list[str]) -> Verdict:
    message = f"{len(why)} worker(s) lost while evaluating it; last: {why[-1][:300]}"
    return Verdict(status=Status.CRASH, message=f"CRASH in start-up: {message}",
                   failure=Check("start-up", "", "", False, message))  # fmt: skip
