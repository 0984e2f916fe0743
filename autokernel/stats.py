"""The figures every view shares: one geometric mean over sizes, one Amdahl estimate."""

from __future__ import annotations

import math
from collections.abc import Iterable


def geomean(values: Iterable[float | None]) -> float | None:
    """Geometric mean of the positive values; None (unknown) and non-positive ones are left
    out, and an empty result is None rather than a made-up 1.0."""
    vals = [v for v in values if v is not None and v > 0]
    return math.exp(sum(map(math.log, vals)) / len(vals)) if vals else None


def share_scale(shares: Iterable[float]) -> float:
    """The one rule for plan shares that sum past 1 (plan entries that overlap): every share is
    scaled by 1 / their sum, so they sum to 1 with no rest; below 1 they stand as they are.
    The sum is over every target of the plan, used or not: the overlap is the plan's, so a
    figure over some targets (verify's kept kernels) scales them as one over all of them does
    (the report's)."""
    total = sum(shares)
    return 1.0 / total if total > 1.0 else 1.0


def amdahl(pairs: Iterable[tuple[float, float | None]]) -> float:
    """Whole-model speedup from (share of the time, speedup) per part: 1 / (sum share/s + rest).

    A part without a measured speedup runs as before (s = 1); give every part of the plan,
    unused ones with None, so that share_scale sees them all. Scaled shares make nothing
    faster 1x and everything twice as fast 2x, where leaving them unscaled gave less than
    either. Everything free is an infinite speedup."""
    pairs = list(pairs)
    total = sum(share for share, _ in pairs)
    scale = share_scale(share for share, _ in pairs)
    time = sum(scale * share / (s if s and s > 0 else 1.0) for share, s in pairs)
    time += max(0.0, 1.0 - total)
    return 1.0 / time if time > 0 else float("inf")
