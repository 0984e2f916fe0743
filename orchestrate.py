"""The night's policy: which target to work on, when to move on, when to go round again.

Targets are taken in order of expected gain in the model, against the user's baseline mode
(eager or torch.compile, the run's --mode): the target's share of the model's time in that mode
times the fraction of it a kernel at the roofline would save (see TargetState.gain). A target
whose measured starter is far below that baseline at the model's shape (Rules.reach) waits until
the targets within reach had their turn. One target is worked until a move-on rule fires:
5 consecutive experiments not kept, >= 90 % of the roofline peak, 2 h spent on that target
(counted per target, across resumes), 2x faster than the baseline, or its starter out of reach.
The whole run stops at the night's --hours budget. The state these rules read is
autokernel/run/state.py.

    python orchestrate.py status [WORKSPACE]     # same as `autokernel status`
"""

from __future__ import annotations

import sys
from dataclasses import dataclass
from pathlib import Path

from autokernel.run.state import State, TargetState, load
from autokernel.views.status import status_lines

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
