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

from autokernel import briefing
from autokernel.agents.base import Agent, AgentError, AgentStopped, InvalidReply
from autokernel.agents.tuner import out_of_resources, read_config
from autokernel.harness import sandbox
from autokernel.harness.interleave import Comparison
from autokernel.harness.verdict import Status, Verdict
from autokernel.keep_rule import Decision, Remeasure, decide, remeasured, score
from autokernel.results import ResultsLog
from autokernel.workspace import Workspace, WorkspaceError
from orchestrate import (
    Rules,
    Score,
    State,
    TargetState,
    move_on_reason,
    next_target,
    reopen,
    save,
)

VERDICTS = Path(".autokernel") / "verdicts"


class RunError(Exception):
    """The run cannot go on (disk full, the branch changed under us): state is saved, and the
    message says what to do before `--resume`."""


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
    def experiment(self, row: dict[str, object], note: str) -> None: ...
    def update(self, state: State) -> None: ...


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
        self._clock = clock
        self._mark = clock()
        self.stop_requested = False
        self.done_here = 0

    # ---- the loop ---------------------------------------------------------------------------

    def run(self) -> str:
        """Run until a budget, the experiment bound, Ctrl-C or the last target; return why."""
        self.recover()
        while True:
            reason = self.stop_reason()
            if reason:
                break
            ts = self._active()
            if ts is None:
                reason = "every target is finished"
                break
            if ts.baseline is None and ts.best is None:
                self._start_target(ts)
            elif ts.rebase:
                self._rebase_target(ts)
            else:
                self._experiment(ts)
        self.state.ended = reason
        self._save()
        return reason

    def begin(self) -> None:
        """A new run's first step: the branch is created by committing the first target's
        starter, recorded as in flight first so that even this step survives a kill."""
        ts = self._active()
        if ts is None:
            return
        n = self.state.next_experiment
        hypothesis = f"baseline: the shipped kernels/{ts.target.kernel_type}.py"
        self.state.in_flight = {
            "experiment": n, "target": ts.name, "hypothesis": hypothesis, "agent": "starter",
            "tokens": 0, "commit": None, "baseline": True,
        }  # fmt: skip
        self._save()
        source = briefing.starter_source(ts.target.kernel_type)
        sha = self.ws.start(self.state.tag, source, f"exp {n} [{ts.name}]: {hypothesis}")
        self.state.in_flight["commit"] = self.state.head = sha
        self._save()
        self.reporter.event(f"branch {self.ws.branch} created; exp {n} [{ts.name}] {sha[:8]}")
        self._evaluate_in_flight()

    def stop_reason(self) -> str | None:
        s = self.state
        if self.stop_requested:
            return "stopped on request (Ctrl-C); continue with --resume"
        if s.seconds + self._clock() - self._mark >= s.budget_s:
            return f"the --hours budget ({s.hours:g} h) is spent"
        if s.max_tokens is not None and s.tokens >= s.max_tokens:
            return f"the --max-tokens budget ({s.max_tokens}) is spent"
        n = self.settings.max_experiments
        if n is not None and self.done_here >= n:
            return f"reached --max-experiments {n}"
        return None

    def _active(self) -> TargetState | None:
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
            self._save()
            self.reporter.event(f"target {ts.name}: {ts.target.kernel_type}, "
                                f"{ts.target.share:.0%} of the model's time")  # fmt: skip
        return ts

    def _start_target(self, ts: TargetState) -> None:
        """Experiment N of a new target: the shipped starter, committed and measured as is."""
        source = briefing.starter_source(ts.target.kernel_type)
        hypothesis = f"baseline: the shipped kernels/{ts.target.kernel_type}.py"
        self._commit(ts, source, hypothesis, agent="starter", tokens=0, baseline=True)
        self._evaluate_in_flight()

    def _rebase_target(self, ts: TargetState) -> None:
        """A revisit's first step: the target's best kernel back in kernel.py, re-measured, so
        that keep and revert compare against a fresh figure and never rewind other targets."""
        if ts.best_commit is None:
            ts.rebase = False
            self._start_target(ts)
            return
        source = self.ws.show(ts.best_commit)
        if source == self.ws.kernel_path.read_text():  # nothing happened in between: go on
            ts.best_commit, ts.rebase = self.ws.head(), False
            self._save()
            return
        hypothesis = f"round {ts.rounds}: the best {ts.name} kernel so far, re-measured"
        self._commit(ts, source, hypothesis, "best", 0, baseline=True)
        self._evaluate_in_flight()

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
            self.state.tokens += exc.tokens
            ts.consecutive_reverts += 1
            ts.not_kept += 1
            self._tick(ts)
            self.reporter.event(f"{self.agent.name} gave no usable kernel: {exc}")
            self._after(ts)
            return
        if proposal is None:
            self._finish(ts, f"{self.agent.name} has nothing left to try", final=True)
            return
        self.state.tokens += proposal.tokens
        self._commit(ts, proposal.source, proposal.hypothesis, self.agent.name, proposal.tokens)
        self._evaluate_in_flight()

    # ---- one experiment, crash-safe ---------------------------------------------------------

    def _commit(
        self, ts: TargetState, source: str, hypothesis: str, agent: str, tokens: int,
        baseline: bool = False,
    ) -> None:  # fmt: skip
        n = self.state.next_experiment
        hypothesis = " ".join(hypothesis.split())[:200] or "(no hypothesis given)"
        self.state.in_flight = {
            "experiment": n, "target": ts.name, "hypothesis": hypothesis, "agent": agent,
            "tokens": tokens, "commit": None, "baseline": baseline,
        }  # fmt: skip
        self._save()
        message = f"exp {n} [{ts.name}]: {hypothesis}"
        if source == self.ws.kernel_path.read_text() and baseline:
            sha = self.ws.head()  # this type's starter is already in place: nothing to commit
        else:
            sha = self.ws.commit_kernel(source, message)
        self.state.in_flight["commit"] = sha
        self._save()
        self.reporter.event(f"exp {n} [{ts.name}] {sha[:8]}: {hypothesis}")

    def _evaluate_in_flight(self) -> None:
        f = self.state.in_flight
        assert f is not None and f["commit"]
        ts = self.state.target(f["target"])
        verdict = self._evaluate(self.ws.kernel_path, self._options(ts), on_phase=self._phase(f))
        self._verdict_path(f["experiment"]).parent.mkdir(parents=True, exist_ok=True)
        verdict.write(self._verdict_path(f["experiment"]))
        self._conclude(verdict)

    def _conclude(self, verdict: Verdict, recorded: dict[str, str] | None = None) -> None:
        """Decide, record the row (unless it was recorded before a crash), apply, move on."""
        f = self.state.in_flight
        assert f is not None
        ts = self.state.target(f["target"])
        cand = score(verdict, ts.target.labels() or None)
        if recorded is not None:
            decision = Decision(recorded["status"], "recorded before the interruption")
        elif f["baseline"]:
            ok = verdict.status is Status.PASS and cand is not None
            decision = (
                Decision("keep", "baseline")
                if ok
                else Decision(verdict.status.value.lower(), verdict.message)
            )
        else:
            decision = decide(verdict, cand, ts.best, lambda: self._remeasure(ts))
        row = self._row(f, ts, verdict, cand, decision)
        if recorded is None:
            try:
                self.results.append(row)
            except OSError as exc:
                raise RunError(
                    f"cannot append to {self.results.path}: {exc}. Free space or fix "
                    "permissions, then `autokernel run --resume` re-evaluates this experiment."
                ) from exc
        self._apply(ts, f, decision, cand, verdict)
        self.reporter.experiment(row, decision.note)

    def _apply(
        self, ts: TargetState, f: dict, decision: Decision, cand: Score | None, verdict: Verdict
    ) -> None:
        ts.experiments += 1
        sha = f["commit"]
        if decision.status == "keep":
            ts.best, ts.best_commit, self.state.head = cand, sha, sha
            if f["baseline"]:
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
                self.ws.revert(f["experiment"], previous)  # (a resumed revert may be done)
            self.state.head = previous or sha
            ts.not_kept += 1
            ts.consecutive_reverts += 1
            ts.last_failure = _failure_text(verdict) if decision.status != "revert" else None
        try:
            config, _ = read_config(self.ws.show(sha))
            if config and config not in ts.tried_configs:
                ts.tried_configs.append(config)
            # Out of shared memory, or spilled registers and not kept: larger tiles fare worse.
            too_big = out_of_resources(verdict.message) or bool(verdict.spilled_registers)
            if config and decision.status != "keep" and too_big:
                ts.oversized_configs.append(config)
        except (AgentError, SyntaxError, WorkspaceError):
            pass  # an LLM's kernel without a literal CONFIG: nothing for the tuner to remember
        self.state.in_flight = None
        self.state.next_experiment = f["experiment"] + 1
        self.done_here += 1
        self._tick(ts)
        if f["baseline"] and decision.status != "keep":
            what = "its best kernel, re-measured," if ts.rebase else "the shipped starter"
            self._finish(ts, f"{what} did not pass: {verdict.message}", final=True)
            return
        self._after(ts)

    def _after(self, ts: TargetState) -> None:
        rules = self.settings.rules
        if not self.settings.on_gpu:  # interpreter vs CPU PyTorch says nothing about GPU speed
            rules = dataclasses.replace(rules, speedup=float("inf"))
        move_on = move_on_reason(ts, rules)
        if move_on:
            self._finish(ts, *move_on)
        else:
            self._save()

    def _finish(self, ts: TargetState, reason: str, final: bool = False) -> None:
        """Move on: commit the target's best kernel as optimized/<target>.py."""
        self.state.finishing = ts.name
        ts.reason, ts.final = reason, final
        self._save()
        if ts.best_commit and ts.best is not None:
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
        self._save()
        self.reporter.event(f"target {ts.name} done: {reason}")

    # ---- resume -----------------------------------------------------------------------------

    def recover(self) -> None:
        """Finish whatever a crash or kill interrupted, from the state file, git and the rows."""
        s = self.state
        if s.finishing:
            ts = s.target(s.finishing)
            head = self.ws.head()
            if head != s.head and self.ws.message(head).startswith(f"optimized [{ts.name}]"):
                ts.optimized_commit = s.head = head
                ts.status, s.current, s.finishing = "done", None, None
                self._save()
            else:
                self._finish(ts, ts.reason, ts.final)
        f = s.in_flight
        if f is None:
            if s.head and self.ws.head() != s.head:
                raise RunError(
                    f"branch {self.ws.branch} is at {self.ws.head()[:12]}, but the run last "
                    f"recorded {s.head[:12]}: someone committed to it. Move those commits to "
                    f"another branch (`git reset --soft {s.head[:12]}` keeps their changes) and "
                    "resume."
                )
            self.ws.discard_kernel_changes()
            return
        self.ws.discard_kernel_changes()
        recorded = {int(r["experiment"]): r for r in self.results.read()}.get(f["experiment"])
        path = self._verdict_path(f["experiment"])
        if recorded is not None and path.exists() and f["commit"]:
            self.reporter.event(f"exp {f['experiment']}: applying the recorded verdict")
            self._conclude(Verdict.read(path), recorded)
            return
        head = self.ws.head()
        expected = f"exp {f['experiment']} [{f['target']}]:"
        if f["commit"] is None and head != s.head and self.ws.message(head).startswith(expected):
            f["commit"] = head  # killed between the commit and the state write
        if f["commit"] is None or head != f["commit"]:
            s.in_flight = None  # killed before anything was committed: propose again
            self._save()
            return
        self.reporter.event(f"exp {f['experiment']} was interrupted: evaluating it again")
        self._evaluate_in_flight()

    # ---- helpers ----------------------------------------------------------------------------

    def _options(self, ts: TargetState) -> sandbox.Options:
        st = self.settings
        return sandbox.Options(
            timeout_s=st.timeout_s, seed=st.seed, quick=st.quick, dtype=ts.target.dtype,
            compile_baseline=st.compile_baseline, extra_sizes=ts.target.harness_sizes(),
        )  # fmt: skip

    def _remeasure(self, ts: TargetState) -> Remeasure:
        assert ts.best_commit is not None
        best = self.ws.root / ".autokernel" / "best_kernel.py"
        best.write_text(self.ws.show(ts.best_commit))
        self.reporter.phase(f"close to the best: re-timing both, interleaved [{ts.name}]")
        cmp = self._compare(best, self.ws.kernel_path, self._options(ts))
        return remeasured(cmp, ts.target.labels() or None)

    def _phase(self, f: dict) -> Callable[[str], None]:
        prefix = f"exp {f['experiment']} [{f['target']}]: evaluating"
        return lambda p: self.reporter.phase(f"{prefix}: {p}")

    def _verdict_path(self, n: int) -> Path:
        return self.ws.root / VERDICTS / f"{n}.json"

    def _row(
        self, f: dict, ts: TargetState, verdict: Verdict, cand: Score | None, decision: Decision
    ) -> dict[str, object]:
        fail = verdict.failure
        correctness = verdict.status.value + (f"@{fail.stage}" if fail and fail.stage else "")
        return {
            "experiment": f["experiment"], "commit": f["commit"][:12], "target": ts.name,
            "kernel_type": ts.target.kernel_type, "status": decision.status,
            "correctness": correctness,
            "latency_us": cand.us if cand else None,
            "throughput": cand.throughput if cand else None, "unit": cand.unit if cand else None,
            "pct_peak": cand.pct_peak if cand else None,
            "speedup_vs_eager": cand.speedup_vs_eager if cand else None,
            "speedup_vs_compile": cand.speedup_vs_compile if cand else None,
            "harness_s": verdict.harness_s, "agent": f["agent"], "tokens": f["tokens"],
            "description": f["hypothesis"], "sandbox": verdict.sandbox or None,
        }  # fmt: skip

    def _tick(self, ts: TargetState) -> None:
        now = self._clock()
        ts.seconds += now - self._mark
        ts.round_seconds += now - self._mark
        self.state.seconds += now - self._mark
        self._mark = now

    def _save(self) -> None:
        save(self.state, self.ws.root)
        self.reporter.update(self.state)


def _failure_text(verdict: Verdict) -> str:
    parts = [verdict.message]
    if verdict.failure and verdict.failure.message and verdict.failure.message != verdict.message:
        parts.append(verdict.failure.message)
    if verdict.stderr_tail:
        parts.append("stderr (tail):\n" + verdict.stderr_tail[-3000:])
    return "\n".join(parts)
