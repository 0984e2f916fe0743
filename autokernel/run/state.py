"""The run's state: what the night has done so far, per target and in all, in one JSON file
(.autokernel/state.json) replaced atomically, so a `kill -9` leaves either the old state or the
new one. Plain records: the policy that reads them (next target, move-on) is orchestrate.py.
"""

from __future__ import annotations

import json
import secrets
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Literal

from autokernel.cache import write_json_atomic
from autokernel.run.layout import STATE_FILE
from autokernel.targets import Target

__all__ = [
    "FINISHED",
    "STATE_FILE",
    "InFlight",
    "Queued",
    "Score",
    "State",
    "StateError",
    "TargetState",
    "load",
    "new_run_id",
    "new_state",
    "save",
]


FINISHED = "every target is finished"  # State.ended of a run with nothing left to do


class StateError(ValueError):
    """The state file exists but cannot be read (torn, edited, from another version)."""


@dataclass
class Score:
    """A kept kernel's speed: geometric means over the target's scoring sizes."""

    us: float
    spread: float  # relative (p80 - p20) / median, the measurement's own noise
    throughput: float | None = None
    unit: str = ""
    pct_peak: float | None = None
    speedup_vs_eager: float | None = None
    speedup_vs_compile: float | None = None


@dataclass
class TargetState:
    """One target through the night: its counters, its best kernel, and what was tried."""

    target: Target
    status: str = "pending"  # pending -> active -> done
    reason: str = ""  # why it was moved on from
    experiments: int = 0
    kept: int = 0
    not_kept: int = 0
    consecutive_reverts: int = 0
    seconds: float = 0.0
    baseline: Score | None = None
    best: Score | None = None
    best_commit: str | None = None
    optimized_commit: str | None = None
    tried_configs: list[dict] = field(default_factory=list)
    oversized_configs: list[dict] = field(default_factory=list)  # ran out of smem/registers
    last_failure: str | None = None
    final: bool = False  # done for good (at peak, 2x, nothing left); else revisited if time is left
    rounds: int = 1  # visits: a target moved on from for reverts or time comes back in round 2...
    round_seconds: float = 0.0  # time in the current visit (the 2 h rule counts per visit)
    rebase: bool = False  # a revisit starts by committing and re-measuring its best kernel
    round_evaluated: int = 0  # the agent's proposals evaluated in the current visit
    round_invalid: int = 0  # the agent's replies in the current visit that held no kernel

    def idle_round(self) -> bool:
        """The agent was asked in this visit and nothing it sent could be evaluated: another
        round would only ask it again (an agent that never replies usefully must not spin)."""
        return self.round_invalid > 0 and self.round_evaluated == 0

    @property
    def name(self) -> str:
        return self.target.name

    def gain(self, mode: str = "eager") -> float:
        """Expected gain in the model, as a fraction of its time in `mode`: the target's share
        there times (1 - 1/r), r being the speedup over the mode's own time for the target that
        the roofline leaves reachable (the best kernel's speedup vs the mode at the model's
        shape, times 100 / its % of peak). Before a measurement all of the share is assumed
        reachable; without a speedup vs the mode, the best kernel is taken as even with it."""
        share = self.target.mode_share(mode)
        pct = self.best.pct_peak if self.best else None
        if pct is None or pct <= 0:
            return share
        reachable = (self.vs_mode(self.best, mode) or 1.0) * 100.0 / pct
        return share * max(0.0, 1.0 - 1.0 / reachable)

    def vs_mode(self, score: Score | None, mode: str) -> float | None:
        """A kernel's speedup over the baseline mode: at the model's shape where the plan gives
        the target's time in that mode, else at the harness sizes."""
        if score is None:
            return None
        measured = score.speedup_vs_compile if mode == "compile" else score.speedup_vs_eager
        return self.target.mode_speedup(score.us, mode) or measured

    def in_reach(self, mode: str, reach: float) -> bool:
        """Not known to be far below the baseline: unmeasured, or its best at >= `reach`x."""
        x = self.vs_mode(self.best, mode)
        return reach <= 0 or x is None or x >= reach

    def model_gain(self) -> float | None:
        """The best kernel's speedup where the model spends it: the profiled time of the
        target over the kernel's at that shape (Target.model_speedup), else vs eager."""
        if not self.best:
            return None
        return self.target.model_speedup(self.best.us) or self.best.speedup_vs_eager

    def speedup(self) -> float | None:
        """Best vs the shipped starter, from the scores (1.0 before any kept improvement)."""
        if self.best and self.baseline:
            return self.baseline.us / self.best.us
        return None


@dataclass
class Queued:
    """A proposal the parallel loop has numbered but not yet written (autokernel/parallel.py):
    saved in the state with its kernel under .autokernel/pending/N.py before any worker runs
    it, so a resume neither loses it nor gives its number twice."""

    experiment: int
    target: str
    agent: str
    tokens: int
    hypothesis: str
    kind: Literal["kernel", "invalid"]  # invalid: the reply held no usable kernel
    why: str = ""  # why it is invalid
    base: str | None = None  # the best's commit it was proposed from
    base_score: dict | None = None  # that best's Score, as JSON
    config: dict | None = None  # its CONFIG literal, shown to the agents asked beside it
    evaluated: bool = False  # its verdict is saved; it is written when its number's turn comes
    worker: str | None = None  # the slot evaluating (or that evaluated) it
    lost: list[str] = field(default_factory=list)  # why each worker that ran it was lost


@dataclass
class InFlight:
    """The experiment between taking its number and writing its row. Saved before its commit
    and again after it, so that a resume finds what a kill interrupted (run/recovery.py)."""

    experiment: int
    target: str
    hypothesis: str
    agent: str
    tokens: int
    commit: str | None = None  # None until the kernel is committed
    baseline: bool = False  # a starter or a revisit's re-measure: kept when it passes
    # Written by the parallel loop from its queue: the queue entry (put back when the commit
    # never happened), the best it was proposed from, and the slot that evaluated it.
    queued: bool = False
    base: str | None = None
    base_score: dict | None = None
    worker: str | None = None
    entry: Queued | None = None


@dataclass
class State:
    tag: str
    agent: str
    hours: float
    targets: list[TargetState]
    seconds: float = 0.0  # of the night's budget spent (across resumes)
    next_experiment: int = 0
    head: str | None = None  # the branch's commit between experiments
    current: str | None = None  # the active target's name
    tokens: int = 0
    max_tokens: int | None = None
    in_flight: InFlight | None = None  # the experiment between its number and its row
    # With parallel workers: proposals numbered but not yet written, in experiment order; the
    # one being written moves to in_flight.
    queue: list[Queued] = field(default_factory=list)
    parallel: dict = field(default_factory=dict)  # {workers, ray_address}: kept by --resume
    finishing: str | None = None  # a target whose optimized/ commit is being written
    ended: str = ""  # why the last session of this run stopped
    agent_args: dict = field(default_factory=dict)  # kind, model, base URL, command: no secrets
    mode: str = "eager"  # the user's baseline (autokernel/mode.py); runs from before it: eager
    reach: float = 0.0  # Rules.reach as the run was started with it; 0: every target in reach
    backend: str = "triton"  # --backend: triton, cuda or any (autokernel/backends.py)
    run_id: str = ""  # whose heartbeat.json is whose (run/night_clock.py); "": none yet

    @property
    def budget_s(self) -> float:
        return self.hours * 3600.0

    def target(self, name: str) -> TargetState:
        for ts in self.targets:
            if ts.name == name:
                return ts
        raise KeyError(name)

    def active(self) -> TargetState | None:
        return self.target(self.current) if self.current else None

    def to_json(self) -> dict:
        data = asdict(self)
        data["targets"] = [{**asdict(ts), "target": ts.target.to_json()} for ts in self.targets]
        return data

    @classmethod
    def from_json(cls, data: dict) -> State:
        targets = []
        for raw in data["targets"]:
            raw = dict(raw)
            raw["target"] = Target.from_json(raw["target"])
            for key in ("baseline", "best"):
                raw[key] = Score(**raw[key]) if raw.get(key) else None
            targets.append(TargetState(**raw))
        flight = data.get("in_flight")
        if flight is not None:
            entry = flight.get("entry")
            flight = InFlight(**{**flight, "entry": Queued(**entry) if entry else None})
        queue = [Queued(**e) for e in data.get("queue", [])]
        return cls(**{**data, "targets": targets, "in_flight": flight, "queue": queue})


def new_run_id() -> str:
    """An identity for one run beside its tag: a tag is free again once its branch is deleted,
    and what an earlier run left (its heartbeat) must not count for the new one."""
    return secrets.token_hex(8)


def new_state(
    tag: str,
    agent: str,
    hours: float,
    targets: list[Target],
    max_tokens: int | None = None,
    mode: str = "eager",
    reach: float = 0.0,
    backend: str = "triton",
) -> State:
    return State(
        tag=tag,
        agent=agent,
        hours=hours,
        max_tokens=max_tokens,
        targets=[TargetState(t) for t in targets],
        mode=mode,
        reach=reach,
        backend=backend,
        run_id=new_run_id(),
    )


def save(state: State, workspace: Path) -> None:
    """Replace the state file atomically: a kill leaves the old state or the new one."""
    write_json_atomic(workspace / STATE_FILE, state.to_json())


def load(workspace: Path) -> State | None:
    """The run's state; None when the workspace has no run; ValueError when it is damaged."""
    path = workspace / STATE_FILE
    try:
        return State.from_json(json.loads(path.read_text()))
    except FileNotFoundError:
        return None
    except (ValueError, KeyError, TypeError) as exc:
        raise StateError(
            f"{path} is damaged ({exc}), so this run cannot be resumed: `autokernel run` without "
            f"--resume starts a new one (its branch and results.tsv stay; the file is kept as "
            f"{path.name}.damaged)"
        ) from exc
