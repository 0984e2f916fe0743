"""Keep or revert: a candidate is kept only when it passed and is faster beyond the noise.

Figures from two separate evaluations drift (clocks, thermals, neighbours on a shared host), so
a candidate that looks faster by less than a clear margin is re-timed against the best in one
process, interleaved (A, B, A, B, ...), and kept only if it still wins by more than the spread
of those paired measurements.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from autokernel.harness.interleave import Comparison
from autokernel.harness.verdict import Status, Verdict
from autokernel.run.state import Score
from autokernel.stats import geomean

MIN_GAIN = 0.01  # a win below 1 % is not worth a commit: it is within run-to-run drift
CLEAR_MARGIN = 3.0  # a win beyond this many spreads needs no re-measurement


@dataclass(frozen=True)
class Decision:
    status: str  # keep, revert, fail, crash, timeout, rejected
    note: str  # why, in words, for the log and the agent


@dataclass(frozen=True)
class Remeasure:
    """What an interleaved re-measurement found (the harness's Comparison, reduced)."""

    ratio: float  # best_us / candidate_us: > 1 means the candidate is faster
    noise: float  # relative spread of the paired ratios
    error: str | None = None


def remeasured(cmp: Comparison, labels: set[str] | None) -> Remeasure:
    """An interleaved comparison reduced to the sizes that decide: the model's real shapes
    when the target has them, as in `score`, else every size."""
    if cmp.error:
        return Remeasure(1.0, 0.0, cmp.error)
    chosen = [s for s in cmp.sizes if labels and s["size"] in labels]
    if not chosen:
        return Remeasure(cmp.ratio, cmp.noise)
    ratio = geomean(s["ratio"] for s in chosen) or 1.0
    return Remeasure(ratio, geomean(max(s["noise"], 1e-9) for s in chosen) or 0.0)


def score(verdict: Verdict, labels: set[str] | None = None) -> Score | None:
    """Geometric means over the timings at `labels` (the target's real shapes) or all."""
    timings = [t for t in verdict.timings if not labels or t.size in labels] or verdict.timings
    if not timings:
        return None
    us = geomean([t.us for t in timings])
    assert us is not None
    spreads = [t.spread_us / t.us for t in timings if t.us > 0]
    return Score(
        us=us,
        spread=sum(spreads) / len(spreads) if spreads else 0.0,
        throughput=geomean([t.throughput for t in timings]),
        unit=timings[0].unit,
        pct_peak=geomean([t.pct_peak for t in timings]),
        speedup_vs_eager=geomean([t.speedup_vs_eager for t in timings]),
        speedup_vs_compile=geomean([t.speedup_vs_compile for t in timings]),
    )


def decide(
    verdict: Verdict,
    candidate: Score | None,
    best: Score | None,
    remeasure: Callable[[], Remeasure],
) -> Decision:
    if verdict.status is not Status.PASS:
        return Decision(verdict.status.value.lower(), verdict.message)
    if candidate is None:
        return Decision("revert", "passed, but no timing to compare")
    if best is None:
        return Decision("keep", "first passing kernel of this target")
    gain = best.us / candidate.us - 1.0
    noise = max(best.spread, candidate.spread) / 2
    if gain <= 0:
        return Decision("revert", f"{-gain:.1%} slower than the best ({best.us:.1f} µs)")
    if gain > max(MIN_GAIN, CLEAR_MARGIN * noise):
        return Decision("keep", f"{gain:.1%} faster than the best (noise ±{noise:.1%})")
    return interleaved(remeasure())


def interleaved(again: Remeasure, why: str = "") -> Decision:
    """The decision from an interleaved re-measurement alone: kept only if the candidate still
    wins by more than 1 % and the spread of the paired ratios. `why`: what called for it."""
    why = f" ({why})" if why else ""
    if again.error:
        return Decision("revert", f"interleaved re-measurement failed: {again.error}{why}")
    gain = again.ratio - 1.0
    if gain > max(MIN_GAIN, again.noise):
        return Decision("keep", f"{gain:.1%} faster, interleaved (noise ±{again.noise:.1%}){why}")
    return Decision(
        "revert", f"within noise of the best: {gain:+.1%} interleaved (±{again.noise:.1%}){why}"
    )
