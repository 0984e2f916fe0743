"""What verify expects the patched forward to take, and which target's gain did not show up.

Two sources, best first:
- whole-model effects: each kept target's measured ratio (forward without it / with it, every
  other kernel in; autokernel.model.verify.ablation), from this run or from
  optimized/modes.json: predicted = unpatched forward / product of the ratios. It assumes the
  targets' effects compose, which is what comparing it with the measured forward checks.
- kernel speedups (Amdahl): each target's share of the eager profile and its best kernel's
  speedup where the model spends it (TargetState.model_gain). Eager only: the shares are eager
  times, and a kernel faster in isolation says nothing of what Inductor would have fused.

The kernel-level figure missed by far on a Llama night (1.05-1.22x predicted, 0.72-0.75x
measured): each patched call was faster on the GPU, the launch path and the lost fusion were not
in the figure. Where a prediction misses by more than MISS_LIMIT, the target named is the one
whose expected gain is furthest above its measured whole-model effect.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from pathlib import Path

from autokernel import stats

MISS_LIMIT = 0.15  # relative; the goal's bound on |predicted / measured - 1|
EFFECTS = "whole-model effects"
KERNELS = "kernel speedups (Amdahl)"


def _parts(workspace: Path, used: set[str]) -> list[tuple[str, float, float]]:
    """(target, share of the eager forward, speedup where the model spends it) per target in
    `used` with a measured speedup; shares scaled by stats.share_scale over every target of
    the plan, so that a subset's figure agrees with the report's over all of them."""
    from autokernel.run import state as run_state

    try:
        state = run_state.load(workspace)
    except ValueError:
        return []
    if state is None:
        return []
    scale = stats.share_scale(ts.target.share for ts in state.targets)
    parts = [(ts.name, ts.target.share * scale, ts.model_gain()) for ts in state.targets]
    return [(n, share, float(x)) for n, share, x in parts if n in used and x and share > 0]


def amdahl(workspace: Path, used: set[str]) -> float | None:
    """stats.amdahl over the run's targets in `used` (the others run as before); None without
    any speedup."""
    parts = _parts(workspace, used)
    return stats.amdahl((share, s) for _, share, s in parts) if parts else None


def expected_ratios(workspace: Path, used: set[str]) -> dict[str, float]:
    """Per target, the forward speedup its kernel alone should give by the kernel figures:
    1 / (1 - share * (1 - 1/s))."""
    parts = _parts(workspace, used)
    return {n: 1.0 / max(1e-9, 1.0 - share * (1.0 - 1.0 / s)) for n, share, s in parts}


def from_effects(base_ms: float, ratios: dict[str, float], kept: list[str]) -> float | None:
    """The unpatched forward over the product of the kept targets' measured ratios."""
    if any(t not in ratios for t in kept):
        return None
    return base_ms / math.prod(ratios[t] for t in kept)


@dataclass
class Prediction:
    mode: str  # the patched mode predicted (patched, compile+patched)
    source: str  # EFFECTS or KERNELS
    predicted_ms: float
    measured_ms: float
    missed: str | None = None  # the target whose gain did not show up, when it missed
    message: str = ""

    @property
    def miss(self) -> float:
        return self.predicted_ms / self.measured_ms - 1.0 if self.measured_ms > 0 else 0.0

    @property
    def holds(self) -> bool:
        return abs(self.miss) <= MISS_LIMIT

    def to_json(self) -> dict:
        return asdict(self) | {"miss": self.miss, "holds": self.holds}


def check(
    mode: str,
    source: str,
    predicted_ms: float,
    measured_ms: float,
    expected: dict[str, float],
    measured: dict[str, float],
) -> Prediction:
    """The prediction against the measurement; past MISS_LIMIT, the culprit by name: among the
    targets with both an expected and a measured ratio, the one furthest below expectation."""
    p = Prediction(mode, source, predicted_ms, measured_ms)
    if p.holds:
        return p
    gaps = {t: math.log(expected[t] / measured[t]) for t in expected if t in measured}
    if not gaps:
        where = "no per-target measurement (kernel selection off): cannot say which target"
        if measured and source == EFFECTS:
            where = "the targets' measured effects did not compose"
        p.message = f"prediction missed by {p.miss:+.0%}: {where}"
        return p
    p.missed = max(gaps, key=lambda t: gaps[t])
    p.message = (
        f"prediction missed by {p.miss:+.0%}: {p.missed}'s gain did not show up: expected "
        f"{expected[p.missed]:.2f}x of the forward from its kernel, measured "
        f"{measured[p.missed]:.2f}x in the whole model"
    )
    return p
