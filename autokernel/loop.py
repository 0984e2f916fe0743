"""The overnight loop: propose, commit, evaluate, keep or revert, record — until told to stop.

Every step that changes something durable (a commit, a results row, the state file) is ordered so
that a kill at any instant is recoverable: the state records an experiment as in flight before
its commit, the verdict is saved before its results row, and the row is written before the state
moves on. `recover()` reads those three back and finishes whatever was interrupted, so a resumed
run neither loses nor repeats a row.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from autokernel import backends
from autokernel.agents.base import Agent, AgentError, AgentStopped, InvalidReply
from autokernel.agents.tuner import out_of_resources, read_config
from autokernel.harness import sandbox
from autokernel.harness.interleave import Comparison
from autokernel.harness.verdict import Status, Verdict
from autokernel.orchestrate import Rules, move_on_reason, next_target, reopen
from autokernel.run import baseline_step, briefing, layout, recovery
from autokernel.run.keep_rule import Decision, Remeasure, decide, remeasured, score
from autokernel.run.lock import RunLock
from autokernel.run.night_clock import NightClock
from autokernel.run.recovery import RunError, check_branch
from autokernel.run.results import ResultRow, ResultsLog
from autokernel.run.rows import PARSE_ERRORS, experiment_row, failure_text, invalid_row, unparsable
from autokernel.run.state import FINISHED, InFlight, Score, State, TargetState, save
from autokernel.run.workspace import Workspace, WorkspaceError


@dataclass
class Settings:
    on_gpu: bool
    timeout_s: float = sandbox.DEFAULT_TIMEOUT_S
    quick: bool = False
    compile_baseline: bool = True
    max_experiments: int | None = None  # in this invocation
    rules: Rules = field(default_factory=Rules)
    seed: int | None = None
    revisit: bool = True  # when every target is done and time is left, go round again


class Reporter:
    """What the loop tells the user; the CLI's live view and quiet printer implement it."""

    def event(self, message: str) -> None: ...
    def phase(self, text: str) -> None: ...
    def experiment(self, row: ResultRow, note: str) -> None: ...
    def update(self, state: State) -> None: ...
    def worker(self, slot: str, text: str) -> None: ...  # a parallel slot's current activity


class Loop:
    def __init__(
        self,
        ws: Workspace,
        state: State,
        agent: Agent,
        results: ResultsLog,
        settings: Settings,
        reporter: Reporter | None = None,
        evaluate: Callable[..., Verdict] | None = None,
        compare: Callable[..., Comparison] | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.ws, self.state, self.agent, self.results = ws, state, agent, results
        self.settings, self.reporter = settings, reporter or Reporter()
        self._evaluate = evaluate or sandbox.evaluate
        self._compare = compare or (lambda *a, **k: sandbox.compare(*a, **k))
        self.night = NightClock(state, ws.root, clock)
        self.stop_requested = False
        self.done_here = 0
        self.starter_failures: list[str] = []  # "target: verdict" of starters that did not pass
        self.lock: RunLock | None = None  # the workspace's, held by the session while it runs

    # ---- the loop ---------------------------------------------------------------------------

    def run(self) -> str:
        """Run until a budget, the experiment bound, Ctrl-C or the last target; return why.
        The time a killed session spent is charged first; from then on the heartbeat keeps
        the time spent on disk, and a kill leaves the run marked as not ended."""
        self.night.recover(self.reporter.event)
        self.state.ended = ""
        self.save()
        with self.night.beating():
            return self._run()

    def _run(self) -> str:
        self.recover()
        while True:
            reason = self.stop_reason()
            if reason:
                break
            ts = self.active()
            if ts is None:
                reason = FINISHED
                break
            if ts.baseline is None and ts.best is None:
                baseline_step.start_target(self, ts)
            elif ts.rebase:
                baseline_step.rebase_target(self, ts)
            else:
                self._experiment(ts)
        self.state.ended = reason
        self.save()
        return reason

    def begin(self) -> None:
        """A new run's first step: the branch, created by the first target's starter."""
        with self.night.beating():
            baseline_step.begin(self)

    def stop_reason(self) -> str | None:
        s = self.state
        if self.stop_requested:
            return "stopped on request (Ctrl-C); continue with --resume"
        if self.night.spent() >= s.budget_s:
            return f"the --hours budget ({s.hours:g} h) is spent"
        if s.max_tokens is not None and s.tokens >= s.max_tokens:
            return f"the --max-tokens budget ({s.max_tokens}) is spent"
        n = self.settings.max_experiments
        if n is not None and self.done_here >= n:
            return f"reached --max-experiments {n}"
        return None

    def active(self) -> TargetState | None:
        ts = self.state.active()
        if ts is not None and ts.status != "done":
            return ts
        ts = next_target(self.state)
        if ts is None and self.settings.revisit:
            back = reopen(self.state)
            if back:
                self.reporter.event(
                    "every target visited; time is left, so round "
                    f"{max(t.rounds for t in back)}: back to {', '.join(t.name for t in back)}"
                )
            ts = next_target(self.state)
        if ts is not None:
            ts.status = "active"
            self.state.current = ts.name
            self.save()
            self.reporter.event(f"target {ts.name}: {ts.target.kernel_type}, "
                                f"{ts.target.share:.0%} of the model's time")  # fmt: skip
        return ts

    def _experiment(self, ts: TargetState) -> None:
        best_source = (
            self.ws.show(ts.best_commit) if ts.best_commit else self.ws.kernel_path.read_text()
        )
        ctx = briefing.context(
            self.state, ts, best_source, self.results.read(), self.settings.on_gpu
        )
        self.reporter.phase(
            f"exp {self.state.next_experiment} [{ts.name}]: asking {self.agent.name}"
        )
        try:
            proposal = self.agent.propose(ctx)
        except AgentStopped:
            if self.stop_reason() is None:  # not a budget: treat as a request to stop
                self.stop_requested = True
            return
        except InvalidReply as exc:
            self._invalid(ts, str(exc), exc.tokens)
            return
        except (RecursionError, MemoryError) as exc:  # a kernel too deep for Python's parser
            self._invalid(ts, f"the kernel could not be parsed ({type(exc).__name__})", 0)
            return
        if proposal is None:
            self.finish(ts, f"{self.agent.name} has nothing left to try", final=True)
            return
        backend = backends.of_source(proposal.source)
        if backend not in ctx.backends:  # any agent, not only those that parse replies
            why = f"BACKEND {backend!r}, and this run allows {', '.join(ctx.backends)}"
            self._invalid(ts, why, proposal.tokens)
            return
        self.state.tokens += proposal.tokens
        self.commit(ts, proposal.source, proposal.hypothesis, self.agent.name, proposal.tokens)
        self.evaluate_in_flight()

    def _invalid(self, ts: TargetState, why: str, tokens: int) -> None:
        """A reply with no usable kernel: nothing to commit or evaluate, but it is an experiment
        (a row, a number, --max-experiments), else an agent that never answers usefully spins."""
        n = self.state.next_experiment
        self.state.tokens += tokens
        row = invalid_row(n, ts, self.agent.name, tokens, why)
        self._append(row)
        ts.experiments += 1
        ts.not_kept += 1
        ts.consecutive_reverts += 1
        ts.round_invalid += 1
        self.state.next_experiment = n + 1
        self.done_here += 1
        self._tick(ts)
        self.reporter.experiment(row, f"{self.agent.name} gave no usable kernel: {why}")
        self._after(ts)

    # ---- one experiment, crash-safe ---------------------------------------------------------

    def commit(
        self, ts: TargetState, source: str, hypothesis: str, agent: str, tokens: int,
        baseline: bool = False,
    ) -> None:  # fmt: skip
        n = self.state.next_experiment
        hypothesis = " ".join(hypothesis.split())[:200] or "(no hypothesis given)"
        self.state.in_flight = InFlight(n, ts.name, hypothesis, agent, tokens, baseline=baseline)
        self.save()
        check_branch(self.ws, self.state)
        message = f"exp {n} [{ts.name}]: {hypothesis}"
        if source == self.ws.kernel_path.read_text() and baseline:
            sha = self.ws.head()  # this type's starter is already in place: nothing to commit
        else:
            sha = self.ws.commit_kernel(source, message)
        self.state.in_flight.commit = sha
        self.save()
        self.reporter.event(f"exp {n} [{ts.name}] {sha[:8]}: {hypothesis}")

    def evaluate_in_flight(self, recorded: dict[str, str] | None = None) -> None:
        """Evaluate the committed experiment; `recorded`: its row is already in results.tsv."""
        f = self.state.in_flight
        assert f is not None and f.commit
        ts = self.state.target(f.target)
        try:
            verdict = self._evaluate(
                self.ws.kernel_path, self._options(ts), on_phase=self._phase(f)
            )
        except PARSE_ERRORS as exc:  # the file's content, not the run: a verdict, every resume
            verdict = unparsable(exc)
        self.verdict_path(f.experiment).parent.mkdir(parents=True, exist_ok=True)
        verdict.write(self.verdict_path(f.experiment))
        self.conclude(verdict, recorded)

    def conclude(self, verdict: Verdict, recorded: dict[str, str] | None = None) -> None:
        """Decide, record the row (unless it was recorded before a crash), apply, move on."""
        f = self.state.in_flight
        assert f is not None
        check_branch(self.ws, self.state)  # a revert or keep on a deleted branch goes astray
        ts = self.state.target(f.target)
        cand = score(verdict, ts.target.labels() or None)
        if recorded is not None:
            decision = Decision(recorded["status"], "recorded before the interruption")
        elif f.baseline:
            ok = verdict.status is Status.PASS and cand is not None
            decision = (
                Decision("keep", "baseline")
                if ok
                else Decision(verdict.status.value.lower(), verdict.message)
            )
        else:
            decision = self._decide(ts, f, verdict, cand)
        row = experiment_row(f, ts, verdict, cand, decision)
        if recorded is None:
            self._append(row)
        self._apply(ts, f, decision, cand, verdict)
        self.reporter.experiment(row, decision.note)

    def _decide(
        self, ts: TargetState, f: InFlight, verdict: Verdict, cand: Score | None
    ) -> Decision:
        """Keep or revert a proposal against the target's best (keep_rule.py)."""
        return decide(verdict, cand, ts.best, lambda: self._remeasure(ts))

    def _apply(
        self, ts: TargetState, f: InFlight, decision: Decision, cand: Score | None, verdict: Verdict
    ) -> None:
        ts.experiments += 1
        ts.round_evaluated += not f.baseline
        sha = f.commit
        if decision.status == "keep":
            ts.best, ts.best_commit, self.state.head = cand, sha, sha
            if f.baseline:
                if ts.baseline is None or ts.kept == 0:  # still the starter: fresher figure
                    ts.baseline = cand
                ts.rebase = False
            else:
                ts.kept += 1
            ts.consecutive_reverts = 0
            ts.last_failure = None
        else:
            previous = ts.best_commit or self.state.head
            if previous and previous != sha and self.ws.head() == sha:
                self.ws.revert(f.experiment, previous)  # (a resumed revert may be done)
            self.state.head = previous or sha
            ts.not_kept += 1
            ts.consecutive_reverts += 1
            ts.last_failure = failure_text(verdict) if decision.status != "revert" else None
        try:
            config, _ = read_config(self.ws.show(sha))
            if config and config not in ts.tried_configs:
                ts.tried_configs.append(config)
            # Out of shared memory, or spilled registers and not kept: larger tiles fare worse.
            too_big = out_of_resources(verdict.message) or bool(verdict.spilled_registers)
            if config and decision.status != "keep" and too_big:
                ts.oversized_configs.append(config)
        except (AgentError, WorkspaceError, *PARSE_ERRORS):
            pass  # an LLM's kernel without a literal CONFIG: nothing for the tuner to remember
        self.state.in_flight = None
        # (parallel workers assign numbers at proposal: the counter may be ahead already)
        self.state.next_experiment = max(self.state.next_experiment, f.experiment + 1)
        self.done_here += 1
        self._tick(ts)
        if f.baseline and decision.status != "keep":
            what = "its best kernel, re-measured," if ts.rebase else "the shipped starter"
            if not ts.rebase:
                self.starter_failures.append(f"{ts.name}: {verdict.message}")
            self.finish(ts, f"{what} did not pass: {verdict.message}", final=True)
            return
        self._after(ts)

    def _rules(self) -> Rules:
        rules = self.settings.rules
        if not self.settings.on_gpu:  # interpreter vs CPU PyTorch says nothing about GPU speed
            rules = dataclasses.replace(rules, speedup=float("inf"))
        return rules

    def _after(self, ts: TargetState) -> None:
        move_on = move_on_reason(ts, self._rules())
        if move_on:
            self.finish(ts, *move_on)
        else:
            self.save()

    def finish(self, ts: TargetState, reason: str, final: bool = False) -> None:
        """Move on: commit the target's best kernel as optimized/<target>.py."""
        self.state.finishing = ts.name
        ts.reason, ts.final = reason, final
        self.save()
        if ts.best_commit and ts.best is not None:
            check_branch(self.ws, self.state)
            source = self.ws.show(ts.best_commit)
            sp = ts.speedup()
            message = f"optimized [{ts.name}]: best of {ts.experiments} experiments" + (
                f", {sp:.2f}x vs the starter" if sp else ""
            ) + f" ({reason})"  # fmt: skip
            ts.optimized_commit = self.ws.save_optimized(ts.name, source, message)
            self.state.head = ts.optimized_commit
        ts.status = "done"
        self.state.current = None
        self.state.finishing = None
        self.save()
        self.reporter.event(f"target {ts.name} done: {reason}")

    def recover(self) -> None:
        """Cross-check the files and finish whatever a crash or kill interrupted."""
        recovery.recover(self)

    def close(self) -> None:
        """Release what the loop holds beyond the workspace lock (parallel workers)."""

    # ---- helpers ----------------------------------------------------------------------------

    def _options(self, ts: TargetState) -> sandbox.Options:
        st = self.settings
        return sandbox.Options(
            timeout_s=st.timeout_s, seed=st.seed, quick=st.quick, dtype=ts.target.dtype,
            compile_baseline=st.compile_baseline, extra_sizes=ts.target.harness_sizes(),
            region=ts.target.region,
        )  # fmt: skip

    def _remeasure(self, ts: TargetState) -> Remeasure:
        assert ts.best_commit is not None
        best = self.ws.root / layout.BEST_KERNEL
        best.write_text(self.ws.show(ts.best_commit))
        self.reporter.phase(f"close to the best: re-timing both, interleaved [{ts.name}]")
        cmp = self._compare(best, self.ws.kernel_path, self._options(ts))
        return remeasured(cmp, ts.target.labels() or None)

    def _phase(self, f: InFlight) -> Callable[[str], None]:
        prefix = f"exp {f.experiment} [{f.target}]: evaluating"
        return lambda p: self.reporter.phase(f"{prefix}: {p}")

    def verdict_path(self, n: int) -> Path:
        return self.ws.root / layout.verdict(n)

    def _append(self, row: ResultRow) -> None:
        try:
            self.results.append(row)
        except OSError as exc:
            raise RunError(
                f"cannot append to {self.results.path}: {exc}. Free space or fix "
                "permissions, then `autokernel run --resume` re-evaluates this experiment."
            ) from exc

    def _tick(self, ts: TargetState) -> None:
        self.night.charge(ts)

    def save(self) -> None:
        save(self.state, self.ws.root)
        self.reporter.update(self.state)
