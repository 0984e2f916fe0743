"""The figures every view shares: one geometric mean over sizes, one Amdahl estimate."""

from __future__ import annotations

import math
from collections.abc import Iterable


def geomean(values: Iterable[float | None]) -> float | None:
    """Geometric mean of the positive values; None (unknown) and non-positive ones are left
    out, and an empty result is None rather than a made-up 1.0."""
    vals = [v for v in values if v is not None and v > 0]
    return math.exp(sum(map(math.log, vals)) / len(vals)) if vals else None


def amdahl(pairs: Iterable[tuple[float, float | None]]) -> float:
    """Whole-model speedup from (share of the time, speedup) per part: 1 / (sum share/s + rest).

    A part without a measured speedup runs as before (s = 1). Shares summing past 1 (plan
    entries that overlap) are scaled down to sum to 1, with no rest: then nothing faster gives
    1x and everything twice as fast 2x, where leaving them unscaled gave less than either.
    Everything free is an infinite speedup."""
    pairs = list(pairs)
    total = sum(share for share, _ in pairs)
    scale = 1.0 / total if total > 1.0 else 1.0
    time = sum(scale * share / (s if s and s > 0 else 1.0) for share, s in pairs)
    time += max(0.0, 1.0 - total)
    return 1.0 / time if time > 0 else float("inf")
