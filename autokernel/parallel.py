"""The overnight loop with several candidates evaluated at once, one per slot (pool.py).

One history, one writer. Experiment numbers are assigned when a proposal arrives; the proposal
is saved (.autokernel/pending/N.py, then state.queue) before it is evaluated anywhere. A slot
evaluates the source it is handed (no commit needed: eval_job.py), and its verdict is saved as
.autokernel/verdicts/N.json when it comes back, in whatever order the slots finish. The driver
then writes experiments strictly in experiment order: the lowest queued experiment, once
evaluated, moves to state.in_flight, is committed on top of the branch, decided against the best
at that moment (parallel_keep.py adds re-timing of rivals and of slow slots), recorded as one
results.tsv row, and kept or reverted (refs/autokernel/attempts/N) exactly as by the sequential
loop, whose steps it reuses. So `git log` and results.tsv hold one commit and one row per
experiment in order, and a kill at any instant leaves the queue, the verdicts and the one
experiment being written, which recovery.py finishes on --resume without asking the agent again.

A lost worker costs only its job: the experiment goes back to the queue, its row says it was
re-run, and after MAX_LOSSES losses it counts as a crash (a candidate that brings nodes down
must not loop forever). A target is moved on from only once its queue is written: the
experiments already proposed for it still count towards it.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

from autokernel.agents.base import AgentError, AgentStopped, InvalidReply, Proposal
from autokernel.agents.tuner import read_config
from autokernel.atomic import write_atomic
from autokernel.harness.verdict import Status, Verdict
from autokernel.loop import Loop
from autokernel.orchestrate import move_on_reason
from autokernel.parallel_jobs import WAIT_S, SlotJobs
from autokernel.pool import Event, Pool
from autokernel.run import baseline_step, briefing, layout, recovery
from autokernel.run.keep_rule import Decision, interleaved
from autokernel.run.parallel_keep import rival_reason
from autokernel.run.proposals import Proposer, Ticket
from autokernel.run.recovery import check_branch
from autokernel.run.rows import PARSE_ERRORS, invalid_row
from autokernel.run.slot_board import SlotBoard, Visit
from autokernel.run.state import FINISHED, InFlight, Queued, Score, TargetState
from autokernel.run.worker_log import WorkerLog


class ParallelLoop(SlotJobs, Loop):
    def __init__(self, *args: Any, pool: Pool, **kwargs: Any) -> None:
        self.pool = pool
        self.board = SlotBoard(list(pool.slots))
        self._calls = 0
        self._answers: dict[str, Event] = {}  # synchronous calls' events, by key
        self._prefer: str | None = None  # the slot a comparison should run on
        self._hold: set[str] = set()  # move-on fired: no new proposals until its queue is written
        self._exhausted: set[str] = set()  # nothing beyond what is in flight: ask after the drain
        self._nothing_left: set[str] = set()
        kwargs.update(evaluate=self._evaluate_on_pool, compare=self._compare_on_pool)
        super().__init__(*args, **kwargs)
        self._calibrate = self.settings.on_gpu
        self.proposer = Proposer(self.agent)
        self.wlog = WorkerLog(self.ws.root)

    # ---- the loop ---------------------------------------------------------------------------

    def _run(self) -> str:
        self.recover()
        reason: str | None = None
        while True:
            self._write_ready()
            reason = reason or self.stop_reason()
            if reason or (ts := self._target()) is None:
                if not self._outstanding():
                    break
                self._dispatch()  # finish what was proposed: every number gets its row
                self._pump(WAIT_S)
                continue
            if not self._outstanding() and ts.baseline is None and ts.best is None:
                baseline_step.start_target(self, ts)
            elif not self._outstanding() and ts.rebase:
                baseline_step.rebase_target(self, ts)
            elif ts.name in self._nothing_left and not self._outstanding(ts.name):
                self._nothing_left.discard(ts.name)
                self.finish(ts, f"{self.agent.name} has nothing left to try", final=True)
            else:
                self._fill(ts)
                self._pump(WAIT_S)
        self.state.ended = reason or FINISHED
        self.save()
        return self.state.ended

    def recover(self) -> None:
        recovery.recover(self)
        recovery.check_queue(self)

    def close(self) -> None:
        self.pool.close()

    def _target(self) -> TargetState | None:
        if self._outstanding():
            return self.state.active()  # proposals in flight belong to the active target
        return self.active()

    def _outstanding(self, target: str | None = None) -> int:
        queued = [e for e in self.state.queue if target is None or e.target == target]
        asking = len(self.proposer.asking) if target is None else self.proposer.asking_for(target)
        return len(queued) + asking

    def _visit(self) -> Visit | None:
        ts = self.state.active()
        return (ts.name, ts.rounds) if ts else None

    # ---- proposals ----------------------------------------------------------------------------

    def _may_propose(self, ts: TargetState) -> bool:
        if self.stop_reason() is not None or ts.status == "done":
            return False
        if ts.name in self._hold | self._exhausted | self._nothing_left:
            return False
        bound = self.settings.max_experiments
        return bound is None or self.done_here + self._outstanding() < bound

    def _fill(self, ts: TargetState) -> None:
        width = len(self.board.usable(self._visit()))
        while self._may_propose(ts):
            waiting = sum(map(self._waiting, self.state.queue))
            if self.proposer.instant and len(self.board.free(self._visit())) <= waiting:
                break  # asked only for a free slot: each proposal sees the freshest best
            if not self.proposer.instant and len(self.proposer.asking) + waiting >= width:
                break
            answered = self.proposer.ask(self._ticket(ts))
            if answered is not None:
                self._arrived(answered)
        self._dispatch()

    def _ticket(self, ts: TargetState) -> Ticket:
        best = self.ws.show(ts.best_commit) if ts.best_commit else self.ws.kernel_path.read_text()
        ctx = briefing.context(self.state, ts, best, self.results.read(), self.settings.on_gpu)
        mine = [e for e in self.state.queue if e.target == ts.name and e.kind == "kernel"]
        busy = [{"experiment": e.experiment, "hypothesis": e.hypothesis, "config": e.config}
                for e in mine]  # fmt: skip
        asking = self.proposer.asking_for(ts.name)
        ctx = dataclasses.replace(ctx, experiment=self.state.next_experiment + asking,
                                  in_flight=busy, others_asking=asking)  # fmt: skip
        return Ticket(ts.name, ctx, ts.best_commit, ts.best)

    def _arrived(self, ticket: Ticket) -> None:
        ts, out = self.state.target(ticket.target), ticket.outcome
        if isinstance(out, AgentStopped):
            if self.stop_reason() is None:  # not a budget: a request to stop
                self.stop_requested = True
        elif isinstance(out, InvalidReply):
            self._number(ts, ticket, "invalid", why=str(out), tokens=out.tokens)
        elif isinstance(out, RecursionError | MemoryError):  # too deep for Python's parser
            self._number(ts, ticket, "invalid", why=f"the kernel could not be parsed "
                                                    f"({type(out).__name__})")  # fmt: skip
        elif isinstance(out, BaseException):
            raise out  # AgentError and our own bugs: the session reports them
        elif out is None:
            (self._exhausted if self._outstanding(ts.name) else self._nothing_left).add(ts.name)
        else:
            self._number(ts, ticket, "kernel", proposal=out)

    def _number(self, ts: TargetState, ticket: Ticket, kind: str, why: str = "",
                tokens: int = 0, proposal: Proposal | None = None) -> None:  # fmt: skip
        """Give the proposal its experiment number and save it before anything runs it."""
        n = self.state.next_experiment
        text = proposal.hypothesis if proposal else ""
        config = None
        if proposal is not None:
            tokens = proposal.tokens
            write_atomic(self.pending_path(n), proposal.source)
            try:
                config = read_config(proposal.source)[0] or None
            except (AgentError, *PARSE_ERRORS):
                config = None  # an LLM's kernel without a literal CONFIG
        base = dataclasses.asdict(ticket.base_score) if ticket.base_score else None
        self.state.queue.append(Queued(
            n, ts.name, self.agent.name, tokens,
            " ".join(text.split())[:200] or "(no hypothesis given)",
            kind, why, ticket.base_commit, base, config, evaluated=kind == "invalid",
        ))  # fmt: skip
        self.state.next_experiment = n + 1
        self.state.tokens += tokens
        self.save()
        if proposal is not None:
            self.reporter.event(f"exp {n} [{ts.name}] proposed: {proposal.hypothesis[:120]}")

    # ---- the one writer -----------------------------------------------------------------------

    def _write_ready(self) -> None:
        """Write every experiment whose turn has come: the lowest queued, once evaluated."""
        while self.state.queue and self.state.queue[0].evaluated:
            e = self.state.queue[0]
            if e.kind == "invalid":
                self.write_invalid(e)
            else:
                self._write_kernel(e)

    def write_invalid(self, e: Queued, recorded: bool = False) -> None:
        """A reply with no usable kernel: a row and a number, nothing committed."""
        ts = self.state.target(e.target)
        row = invalid_row(e.experiment, ts, e.agent, e.tokens, e.why)
        if not recorded:
            self._append(row)
        self.state.queue.remove(e)
        ts.experiments += 1
        ts.not_kept += 1
        ts.consecutive_reverts += 1
        ts.round_invalid += 1
        self.done_here += 1
        self._tick(ts)
        self.reporter.experiment(row, f"no usable kernel: {e.why}")
        self._after(ts)

    def _write_kernel(self, e: Queued) -> None:
        n, ts = e.experiment, self.state.target(e.target)
        source = self.pending_path(n).read_text()
        if source == self.ws.kernel_path.read_text():  # a concurrent one was kept with it
            e.kind, e.why = (
                "invalid",
                (
                    "the same kernel as the current best, which a "
                    "concurrent experiment brought in: nothing to commit"
                ),
            )
            self.write_invalid(e)
            return
        hypothesis = e.hypothesis
        if e.lost:
            hypothesis += f" (re-run after {len(e.lost)} lost worker(s): {e.lost[-1][:80]})"
        f = InFlight(
            n,
            ts.name,
            hypothesis,
            e.agent,
            e.tokens,
            queued=True,
            base=e.base,
            base_score=e.base_score,
            worker=e.worker,
            entry=e,
        )
        self.state.queue.remove(e)
        self.state.in_flight = f
        self.save()
        check_branch(self.ws, self.state)
        base = f"the best at {e.base[:12]}" if e.base else "the starter"
        where = self.pool.where(e.worker) if e.worker in self.pool.slots else "-"
        message = (f"exp {n} [{ts.name}]: {hypothesis}\n\nproposed from {base}; evaluated on "
                   f"worker {e.worker} ({where})")  # fmt: skip
        f.commit = self.ws.commit_kernel(source, message)
        self.save()
        self.reporter.event(f"exp {n} [{ts.name}] {f.commit[:8]}: {hypothesis}")
        self.conclude(Verdict.read(self.verdict_path(n)))
        self.pending_path(n).unlink(missing_ok=True)

    def _decide(
        self, ts: TargetState, f: InFlight, verdict: Verdict, cand: Score | None
    ) -> Decision:
        if not f.queued or verdict.status is not Status.PASS or not cand or not ts.best:
            return super()._decide(ts, f, verdict, cand)
        base = Score(**f.base_score) if f.base_score else None
        why = rival_reason(f.base, base, ts.best_commit, cand)
        self._prefer = None
        if self.board.slot_status((ts.name, ts.rounds), f.worker) == "slow":
            self._prefer = f.worker
            why = f"worker {self._prefer} times differently from the others"
        if why is None:
            return super()._decide(ts, f, verdict, cand)
        try:
            return interleaved(self._remeasure(ts), why)
        finally:
            self._prefer = None

    def _after(self, ts: TargetState) -> None:
        if self._outstanding(ts.name):  # its proposals in flight are written first
            if move_on_reason(ts, self._rules()):
                self._hold.add(ts.name)
            else:
                self._hold.discard(ts.name)
            self.save()
            return
        self._hold.discard(ts.name)
        self._exhausted.discard(ts.name)
        super()._after(ts)

    def pending_path(self, n: int) -> Path:
        return self.ws.root / layout.pending(n)


def open_parallel_loop(parallel: dict, log_dir: Path, parts: tuple) -> ParallelLoop:
    """The parallel loop over a local process pool or a Ray cluster, its workers' log in
    log_dir; PoolError where the pool cannot start. A local pool needs no Ray: one machine's
    GPUs are started as processes of our own, as a lone worker is."""
    ws, state, agent, results, settings, view = parts
    workers, address = parallel.get("workers"), parallel.get("ray_address")
    pool = _make_pool(workers, address, settings.on_gpu, log_dir)
    settings.on_gpu = settings.on_gpu or pool.on_gpu  # a CPU driver of a GPU cluster
    where = f"the Ray cluster at {address}" if address else "this machine"
    view.event(f"{len(pool.slots)} workers on {where}: one candidate each at a time; "
               "experiments are written in order by this process")  # fmt: skip
    if pool.note:
        view.event(f"note: {pool.note}")
    gpus = {pool.where(s) for s in pool.slots}
    if settings.on_gpu and not address and len(gpus) < len(pool.slots):
        view.event(f"note: {len(pool.slots)} workers share {len(gpus)} GPU(s): their timings "
                   "disturb each other, so keep decisions are noisier")  # fmt: skip
    return ParallelLoop(ws, state, agent, results, settings, view, pool=pool)


def _make_pool(workers: int | None, ray_address: str | None, on_gpu: bool, log_dir: Path) -> Pool:
    """The pool the flags ask for: Ray when given an address, else processes of this machine
    (one per GPU, or interpreter processes). Ray is imported only when asked for."""
    from autokernel.pool import LocalPool

    if ray_address:
        from autokernel.ray_pool import RayPool

        return RayPool(ray_address, workers, on_gpu, log_dir)
    gpus = 0
    if on_gpu:
        import torch

        gpus = torch.cuda.device_count()
    return LocalPool(workers or 1, gpus, log_dir)
