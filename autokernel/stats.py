"""The one geometric mean: how speeds over several sizes become one figure, everywhere."""

from __future__ import annotations

import math
from collections.abc import Iterable


def geomean(values: Iterable[float | None]) -> float | None:
    """Geometric mean of the positive values; None (unknown) and non-positive ones are left
    out, and an empty result is None rather than a made-up 1.0."""
    vals = [v for v in values if v is not None and v > 0]
    return math.exp(sum(map(math.log, vals)) / len(vals)) if vals else None
