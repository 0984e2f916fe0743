"""Best against candidate, timed interleaved in one process: the loop's tie-breaker.

Two figures from separate evaluations drift apart (clocks, thermals, a neighbour on a shared
host) by as much as the gains the loop is trying to judge. Timing both kernels on the same
inputs in alternating rounds exposes them to the same drift, and the ratio within each round
cancels it; the spread of those paired ratios is the noise the win must beat. Rounds go A B, then
B A, so neither kernel always runs right after the other.

The worker calls compare_kernels with both kernel files already imported; the parent only ever
sees the JSON form of the Comparison.
"""

from __future__ import annotations

import statistics
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from typing import Any

import torch

from autokernel.harness.stages import Evaluation, StageFailure, call_checked, to_float64
from autokernel.harness.timing import measure
from autokernel.specs import Size, dtype_name
from autokernel.stats import geomean

ROUNDS = 5  # paired rounds per size: a median and a p20-p80 need at least this many
ROLES = ("best", "candidate")


class TimingError(Exception):
    """A kernel raised while being timed."""


@dataclass
class Comparison:
    """The outcome of an interleaved re-measurement; ratio and noise mean nothing when error
    is set."""

    ratio: float = 1.0  # geomean over sizes of best_us / candidate_us: > 1, candidate faster
    noise: float = 0.0  # half the p20-p80 of the paired ratios, relative; geomean over sizes
    sizes: list[dict[str, Any]] = field(default_factory=list)  # per size: see _size_entry
    error: str | None = None  # why no comparison could be made (wrong output, crash, timeout)
    harness_s: float = 0.0
    phase_s: dict[str, float] = field(default_factory=dict)  # where the harness time went

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> Comparison:
        return cls(**d)


def relative_half_spread(ratios: list[float]) -> float:
    """Half the p20-p80 range of the ratios, over their median; 0 with fewer than two."""
    if len(ratios) < 2:
        return 0.0
    q = statistics.quantiles(ratios, n=5)
    return (q[3] - q[0]) / 2 / statistics.median(ratios)


def _size_entry(label: str, dtype: torch.dtype, pairs: list[tuple[float, float]]) -> dict:
    ratios = [b / c for b, c in pairs]
    return {
        "size": label,
        "dtype": dtype_name(dtype),
        "best_us": statistics.median(b for b, _ in pairs),
        "candidate_us": statistics.median(c for _, c in pairs),
        "ratio": statistics.median(ratios),
        "noise": relative_half_spread(ratios),
        "rounds_us": [list(p) for p in pairs],
    }


def _check_both(evs: tuple[Evaluation, Evaluation], args: tuple, label: str, dtype) -> str | None:
    """Both outputs against the reference once, on the inputs about to be timed."""
    expected = evs[0].spec.reference(*to_float64(args))
    for role, ev in zip(ROLES, evs, strict=True):
        try:
            call_checked(ev, "compare", label, dtype, args, expected)
        except StageFailure as failure:
            first = failure.check.message.splitlines()[0] if failure.check.message else ""
            return f"{role} kernel: {failure.status.value} at {label} {dtype_name(dtype)}: {first}"
    return None


def _rounds(
    evs: tuple[Evaluation, Evaluation],
    args: tuple,
    label: str,
    rounds: int,
    progress: Callable[[str], None],
) -> list[tuple[float, float]]:
    """(best_us, candidate_us) per round, best first in even rounds and second in odd ones."""
    pairs = []
    for r in range(max(1, rounds)):
        us = [0.0, 0.0]
        for k in (0, 1) if r % 2 == 0 else (1, 0):
            progress(f"compare {label}: timing {ROLES[k]}")
            try:
                us[k] = measure(lambda ev=evs[k]: ev.kernel_fn(*args), evs[k].on_gpu).median_us
            except Exception as exc:  # its checked call did not raise; a repeated one did
                raise TimingError(
                    f"{ROLES[k]} kernel raised while timed at {label}: {type(exc).__name__}: {exc}"
                ) from None
        pairs.append((us[0], us[1]))
    return pairs


def compare_kernels(
    best: Evaluation,
    candidate: Evaluation,
    sizes: tuple[Size, ...],
    dtype: torch.dtype,
    rounds: int = ROUNDS,
    progress: Callable[[str], None] = lambda s: None,
    checking: Callable[[bool], None] = lambda on: None,
) -> Comparison:
    """Check both kernels once per size, then time them in `rounds` alternating rounds with
    the harness's one timing path. A wrong output ends the comparison with error set."""
    evs = (best, candidate)
    spec = best.spec
    done: list[dict] = []
    for size in sizes:
        label = spec.label(size)
        progress(f"compare {label}: checking")
        args = best.inputs(spec.make_inputs, size, dtype, "compare", label)
        checking(True)
        error = _check_both(evs, args, label, dtype)
        checking(False)
        if error:
            return Comparison(sizes=done, error=error)
        try:
            pairs = _rounds(evs, args, label, rounds, progress)
        except TimingError as exc:
            return Comparison(sizes=done, error=str(exc))
        done.append(_size_entry(label, dtype, pairs))
        del args
    if not done:
        return Comparison(error="no sizes to compare")
    return Comparison(
        ratio=geomean(s["ratio"] for s in done) or 1.0,
        noise=geomean(max(s["noise"], 1e-9) for s in done) or 0.0,
        sizes=done,
    )
