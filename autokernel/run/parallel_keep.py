"""The keep rule when candidates are evaluated side by side: when to trust a figure, and when
to re-time two kernels interleaved on one GPU first.

Decisions stay sequential: the one writer decides each experiment in experiment order against
the best at that moment (keep_rule.decide). Two things differ from one GPU:

- Rivals. A candidate proposed from best B may be decided after a concurrent candidate R, also
  proposed from B, was kept. Both beat B on figures measured on different GPUs at different
  times; which of the two is faster is then not known from those figures. So when the best
  changed while a candidate was in flight and the candidate beats the best it was proposed
  from, the two are re-timed interleaved on one GPU (harness/interleave.py) and the candidate
  is kept only if it wins there.
- GPUs that time differently (clocks, thermals, a noisy neighbour). Each slot times the
  current best once per target visit (a calibration, not an experiment). Interference only
  ever slows a GPU down, so the fastest reading is the reference: a slot slower than it by more
  than SLOW_TOLERANCE and three times the measured spread is flagged, and every passing
  candidate it evaluates is decided by an interleaved comparison on that same slot, where the
  slot's offset cancels. A slot on which the best kernel does not even pass is quarantined.
"""

from __future__ import annotations

from dataclasses import dataclass

from autokernel.run.keep_rule import MIN_GAIN
from autokernel.run.state import Score

SLOW_TOLERANCE = 0.05  # a slot timing the same kernel >5 % slower than the fastest one
SPREAD_FACTOR = 3.0  # ...and by more than this many of its own relative spreads


def beats(candidate: Score | None, best: Score | None) -> bool:
    """Faster than `best` by more than 1 % and the two figures' noise."""
    if candidate is None or best is None or candidate.us <= 0:
        return False
    noise = max(candidate.spread, best.spread) / 2
    return best.us / candidate.us - 1.0 > max(MIN_GAIN, noise)


def rival_reason(
    base_commit: str | None, base: Score | None, best_commit: str | None, candidate: Score | None
) -> str | None:
    """Why the candidate must be re-timed interleaved against the current best before it may
    be kept, or None: the best was kept while it was in flight, and it beat its own base."""
    if base_commit is None or best_commit is None or base_commit == best_commit:
        return None
    if not beats(candidate, base):
        return None
    return "a concurrent candidate was kept while it was in flight; both beat the earlier best"


@dataclass(frozen=True)
class Calibration:
    """One slot's timing of the current best kernel."""

    slot: str
    us: float | None  # None: the best kernel did not pass there
    spread: float = 0.0


@dataclass(frozen=True)
class SlotVerdict:
    slot: str
    status: str  # "ok", "slow" (decide its candidates interleaved) or "broken" (quarantined)
    ratio: float | None  # its time over the fastest slot's
    note: str


def judge_slots(readings: list[Calibration]) -> list[SlotVerdict]:
    """Compare the slots' timings of one kernel: the fastest is the reference."""
    timed = [r for r in readings if r.us is not None and r.us > 0]
    fastest = min((r.us for r in timed), default=None)  # type: ignore[type-var]
    out = []
    for r in readings:
        if r.us is None or r.us <= 0:
            out.append(SlotVerdict(r.slot, "broken", None, "the best kernel did not pass there"))
            continue
        assert fastest is not None
        ratio = r.us / fastest
        limit = 1.0 + max(SLOW_TOLERANCE, SPREAD_FACTOR * r.spread)
        if ratio > limit:
            note = f"times the best kernel {ratio - 1:.0%} slower than the fastest slot"
            out.append(SlotVerdict(r.slot, "slow", ratio, note))
        else:
            out.append(SlotVerdict(r.slot, "ok", ratio, f"within {ratio - 1:+.1%} of the fastest"))
    return out
