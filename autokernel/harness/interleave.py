"""Best against candidate, timed interleaved in one process: the loop's tie-breaker.

Two figures from separate evaluations drift apart (clocks, thermals, a neighbour on a shared
host) by as much as the gains the loop is trying to judge. Timing both kernels on the same
inputs in alternating rounds exposes them to the same drift, and the ratio within each round
cancels it; the spread of those paired ratios is the noise the win must beat. Rounds go A B, then
B A, so neither kernel always runs right after the other.

Both kernels run in one candidate process (the worker), which times the rounds; the judge
(compare_kernels, in the parent) checks both outputs itself and cross-checks each kernel's
claimed median with its own clock (benchmark.cross_check), as for a single evaluation.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from typing import Any, Protocol

import torch

from autokernel.harness.benchmark import KernelProcess, check_timed, cross_check
from autokernel.harness.channel import ChannelError
from autokernel.harness.stages import MAIN, Evaluation, StageFailure, call_checked, expected_output
from autokernel.specs import Size, dtype_name
from autokernel.stats import geomean

ROUNDS = 5  # paired rounds per size: a median and a p20-p80 need at least this many
ROLES = ("best", "candidate")


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


def _check_both(ev: Evaluation, size: Size, dtype: torch.dtype) -> str | None:
    """Both outputs against the reference once, on the inputs about to be timed."""
    label = ev.spec.label(size)
    key = ("compare", label)
    expected = expected_output(ev, MAIN, size, dtype, key)
    for role in (0, 1):
        try:
            call_checked(ev, "compare", MAIN, size, dtype, key, expected, role)
        except StageFailure as failure:
            first = failure.check.message.splitlines()[0] if failure.check.message else ""
            where = f"{label} {dtype_name(dtype)}"
            return f"{ROLES[role]} kernel: {failure.status.value} at {where}: {first}"
    return None


def _pairs(reply: object, rounds: int) -> list[tuple[float, float]]:
    """The rounds the candidate's process reports, parsed as untrusted data."""
    pairs = reply if isinstance(reply, list) else None
    ok = pairs is not None and len(pairs) == max(1, rounds) and all(
        isinstance(p, list) and len(p) == 2
        and all(type(x) is float and math.isfinite(x) and x > 0 for x in p)
        for p in pairs
    )  # fmt: skip
    if not ok:
        raise ChannelError(f"malformed timing rounds: {str(reply)[:200]}")
    return [(p[0], p[1]) for p in pairs]  # type: ignore[union-attr]


class RoundsProcess(KernelProcess, Protocol):
    def rounds(self, rounds: int, label: str) -> dict[str, Any]: ...
    def sampled_in_rounds(self, count: object) -> None: ...
    def timed_outputs(self, role: int = 0) -> list[tuple[tuple | None, torch.Tensor]]: ...


def compare_kernels(
    ev: Evaluation,
    proc: RoundsProcess,
    sizes: tuple[Size, ...],
    dtype: torch.dtype,
    rounds: int = ROUNDS,
    progress: Callable[[str], None] = lambda s: None,
) -> Comparison:
    """Check both kernels once per size, have them timed in `rounds` alternating rounds, and
    cross-check each kernel's median with the judge's clock. A wrong output or a refused time
    ends the comparison with error set."""
    done: list[dict] = []
    for size in sizes:
        label = ev.spec.label(size)
        progress(f"compare {label}: checking")
        error = _check_both(ev, size, dtype)
        if error:
            return Comparison(sizes=done, error=error)
        reply = proc.rounds(rounds, label)
        if reply.get("error"):
            return Comparison(sizes=done, error=str(reply["error"])[:1000])
        pairs = _pairs(reply.get("pairs"), rounds)
        progress(f"compare {label}: cross-check")
        sampled = reply.get("sampled")
        counts = sampled if isinstance(sampled, list) and len(sampled) == 2 else [0, 0]
        for role in (0, 1):
            proc.sampled_in_rounds(counts[role])
            try:
                check_timed(ev, proc, size, dtype, ("compare", label), role)
            except StageFailure as failure:
                first = failure.check.message.splitlines()[0]
                return Comparison(sizes=done, error=f"{ROLES[role]} kernel: {first}")
            claimed = statistics.median(p[role] for p in pairs)
            try:
                cross_check(ev, proc, size, dtype, claimed, role)
            except StageFailure as failure:
                first = failure.check.message.splitlines()[0]
                return Comparison(sizes=done, error=f"{ROLES[role]} kernel: {first}")
        done.append(_size_entry(label, dtype, pairs))
    if not done:
        return Comparison(error="no sizes to compare")
    return Comparison(
        ratio=geomean(s["ratio"] for s in done) or 1.0,
        noise=geomean(max(s["noise"], 1e-9) for s in done) or 0.0,
        sizes=done,
    )
