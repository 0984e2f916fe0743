"""The night's scheduler: which target to work on, when to move on, and the state that says so.

Targets are taken in order of expected gain in the model, against the user's baseline mode
(eager or torch.compile, the run's --mode): the target's share of the model's time in that mode
times the fraction of it a kernel at the roofline would save (see TargetState.gain). A target
whose measured starter is far below that baseline at the model's shape (Rules.reach) waits until
the targets within reach had their turn. One target is worked until a move-on rule fires:
5 consecutive experiments not kept, >= 90 % of the roofline peak, 2 h spent on that target
(counted per target, across resumes), 2x faster than the baseline, or its starter out of reach.
The whole run stops at the night's --hours budget. Everything lives in one JSON file, replaced
atomically, so a `kill -9` leaves either the old state or the new one.

    python orchestrate.py status [WORKSPACE]     # same as `autokernel status`
"""

from __future__ import annotations

import json
import sys
from dataclasses import asdict, dataclass, field
from pathlib import Path

from autokernel.cache import write_json_atomic
from autokernel.targets import Target

STATE_FILE = Path(".autokernel") / "state.json"
REACH = 0.8  # a run's Rules.reach on a GPU


@dataclass(frozen=True)
class Rules:
    """The move-on rules. Defaults are the playbook's; tests and flags may tighten them."""

    max_reverts: int = 5  # consecutive experiments not kept
    peak_pct: float = 90.0  # of the roofline (measured ceiling)
    target_seconds: float = 2 * 3600.0
    speedup: float = 2.0  # vs the baseline mode, the code the model runs today
    # A starter below this fraction of the baseline's speed at the model's shape waits. At 0.8 a
    # night must find 1.25x before the model gains at all: the Llama night's fused_mlp starter
    # at 0.6x took 9 experiments without nearing 1.0x, while targets within reach sat unworked.
    # `autokernel run` sets it on a GPU (State.reach); 0 turns the rule off, as on the CPU, where
    # interpreter timings say nothing about speed.
    reach: float = 0.0
    mode: str = "eager"  # the run's baseline mode (State.mode), for the reach and 2x rules


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
    in_flight: dict | None = None  # {experiment, target, hypothesis, agent, tokens, commit}
    # With parallel workers: proposals numbered but not yet written, in experiment order, each
    # {experiment, target, hypothesis, agent, tokens, kind, base, base_score, evaluated, lost}
    # (autokernel/parallel.py); the one being written moves to in_flight.
    queue: list[dict] = field(default_factory=list)
    parallel: dict = field(default_factory=dict)  # {workers, ray_address}: kept by --resume
    finishing: str | None = None  # a target whose optimized/ commit is being written
    ended: str = ""  # why the last session of this run stopped
    agent_args: dict = field(default_factory=dict)  # kind, model, base URL, command: no secrets
    mode: str = "eager"  # the user's baseline (autokernel/mode.py); runs from before it: eager
    reach: float = 0.0  # Rules.reach as the run was started with it; 0: every target in reach
    backend: str = "triton"  # --backend: triton, cuda or any (autokernel/backends.py)

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
        return cls(**{**data, "targets": targets})


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
    )


def save(state: State, workspace: Path) -> None:
    write_json_atomic(workspace / STATE_FILE, state.to_json())


def load(workspace: Path) -> State | None:
    path = workspace / STATE_FILE
    try:
        return State.from_json(json.loads(path.read_text()))
    except FileNotFoundError:
        return None
    except (ValueError, KeyError, TypeError) as exc:
        raise ValueError(f"{path} is damaged ({exc}); start a new run with another --tag") from exc


def next_target(state: State) -> TargetState | None:
    """The pending target with the largest expected gain in the run's mode (ties: plan order);
    those whose kernel is far below the baseline only when no target within reach is left."""
    pending = [ts for ts in state.targets if ts.status != "done"]
    within = [ts for ts in pending if ts.in_reach(state.mode, state.reach)]
    return max(within or pending, key=lambda ts: ts.gain(state.mode), default=None)


def move_on_reason(ts: TargetState, rules: Rules) -> tuple[str, bool] | None:
    """Why to stop working on this target now and whether for good, or None to continue.

    Reaching the roofline is final. 2x, reverts and time only mean "try elsewhere first": when
    every target has been visited and the night has time left, those come back. 2x applies on
    the first visit only: a target already 2x faster than eager and brought back because nothing
    else is left should use the time, not stop at once (a lone rmsnorm starter is 2.3x eager)."""
    best = ts.best
    if best and best.pct_peak is not None and best.pct_peak >= rules.peak_pct:
        return f"at {best.pct_peak:.0f}% of the roofline peak (rule: {rules.peak_pct:g}%)", True
    compile_mode = rules.mode == "compile"
    baseline = "torch.compile" if compile_mode else "eager PyTorch"
    x = (best.speedup_vs_compile if compile_mode else best.speedup_vs_eager) if best else None
    if ts.rounds == 1 and x is not None and x >= rules.speedup:
        return f"{x:.2f}x faster than {baseline} (rule: {rules.speedup:g}x)", False
    x = ts.vs_mode(best, rules.mode)  # at the model's shape where the plan allows
    if (
        ts.rounds == 1
        and ts.kept == 0
        and x is not None
        and not ts.in_reach(rules.mode, rules.reach)
    ):
        return (
            f"its starter runs at {x:.2f}x {baseline} at the model's shape (rule: "
            f"{rules.reach:g}x): waits until the targets within reach had their turn"
        ), False
    if ts.consecutive_reverts >= rules.max_reverts:
        n = ts.consecutive_reverts
        return f"{n} experiments in a row not kept (rule: {rules.max_reverts})", False
    if ts.round_seconds >= rules.target_seconds:
        h = ts.round_seconds / 3600
        return f"{h:.1f} h spent on it (rule: {rules.target_seconds / 3600:g} h)", False
    return None


def reopen(state: State) -> list[TargetState]:
    """Every target has been visited: bring back those not finished for good, for another
    round from their best kernel (the tuner remembers what it tried, so it goes further).
    A visit in which the agent sent nothing usable is not repeated."""
    back = [
        ts for ts in state.targets if ts.status == "done" and not ts.final and not ts.idle_round()
    ]
    for ts in back:
        ts.status, ts.rebase = "pending", True
        ts.consecutive_reverts, ts.round_seconds = 0, 0.0
        ts.round_evaluated = ts.round_invalid = 0
        ts.rounds += 1
    return back


def status_lines(state: State) -> list[str]:
    """Plain text for `status`: readable over ssh and in a log."""
    left = max(0.0, state.budget_s - state.seconds)
    lines = [
        f"run {state.tag} · agent {state.agent} · experiments {state.next_experiment} · "
        f"{state.seconds / 3600:.2f} h of {state.hours:g} h used ({left / 60:.0f} min left)"
        + (f" · tokens {state.tokens}" if state.tokens else "")
        + (f" · {len(state.queue)} proposed, not yet written" if state.queue else ""),
    ]
    if state.ended:
        lines.append(f"last stop: {state.ended}")
    header = f"{'target':<20} {'status':<8} {'exps':>5} {'kept':>5} {'best µs':>10} "
    lines.append(header + f"{'×start':>7} {'×eager':>7} {'×compile':>8} {'%peak':>6}  note")
    for ts in sorted(state.targets, key=lambda t: -t.target.share):
        b = ts.best

        def fmt(v: float | None, spec: str) -> str:
            return format(v, spec) if v is not None else "-"

        lines.append(
            f"{ts.name:<20} {ts.status:<8} {ts.experiments:>5} {ts.kept:>5} "
            f"{fmt(b.us if b else None, '.1f'):>10} {fmt(ts.speedup(), '.2f'):>7} "
            f"{fmt(b.speedup_vs_eager if b else None, '.3g'):>7} "
            f"{fmt(b.speedup_vs_compile if b else None, '.3g'):>8} "
            f"{fmt(b.pct_peak if b else None, '.0f'):>6}  {ts.reason}"
        )
    return lines


def main(argv: list[str]) -> int:
    if not argv or argv[0] != "status" or len(argv) > 2:
        print(__doc__.strip().splitlines()[-1].strip())
        return 2
    workspace = Path(argv[1] if len(argv) > 1 else ".")
    try:
        state = load(workspace)
    except ValueError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    if state is None:
        print(f"no run in {workspace.resolve()}: start one with `autokernel run`", file=sys.stderr)
        return 1
    print("\n".join(status_lines(state)))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
