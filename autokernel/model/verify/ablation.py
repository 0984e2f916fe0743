"""Which kernels stay in the model: greedy backward elimination on the whole forward, in one mode.

A kernel faster than PyTorch on its own can still slow the model: its launch path costs host
time, and under torch.compile the opaque custom op stops Inductor from fusing the op with its
neighbours (a 4-layer Llama's compiled forward went from 1.92 to 3.98 ms with only rmsnorm
plugged in). So the decision is made on the real forward, in the user's mode.

Backward elimination, not forward selection: start from every kernel that passed the
correctness check, time the forward with all of them and without each one, drop the one whose
removal speeds the forward most, repeat. The targets reaching verify each passed the loop's keep
rule, so most are expected to help: backward then stops after one pass of k + 1 timings, where
adding them one at a time from none needs k passes (k(k+1)/2 + 1 timings) to add them all. The
last pass measures each kept target's effect with every other kept kernel in, the configuration
the user gets: that is the figure the prediction uses (autokernel.model.verify.prediction). The
first pass's figures are not: a kernel dropped later was in both sides of every ratio, and a
slow one adds the same time to both (GPT-2 on the H200: matmul 1.88x with flash_attention and
layernorm in, 2.24x alone, so a prediction from the first pass missed by +19 %).

Noise rule as in the loop (autokernel.run.keep_rule): the forward with and without a target are
timed in the same rounds, interleaved, and the target stays only if the forward is faster with it
by more than max(MIN_GAIN, the half-spread of the paired ratios).
"""

from __future__ import annotations

import statistics
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from typing import TypeVar

from autokernel.harness.interleave import relative_half_spread
from autokernel.run.keep_rule import MIN_GAIN

K = TypeVar("K")
ROUNDS = 5  # paired rounds per pass: a median and a p20-p80 need at least this many

# ms of one forward with exactly these targets' kernels plugged in (the rest run PyTorch)
Timer = Callable[[frozenset[str]], float]


@dataclass(frozen=True)
class Effect:
    """One target's measured effect on the whole forward, every other kept kernel in."""

    target: str
    ratio: float  # forward without it / with it, median of the paired rounds: > 1, it helps
    noise: float  # half the p20-p80 of the paired ratios, relative
    with_ms: float  # median forward time with it
    without_ms: float  # ... and without it

    @property
    def helps(self) -> bool:
        return self.ratio - 1.0 > max(MIN_GAIN, self.noise)

    def describe(self) -> str:
        gain = self.ratio - 1.0
        way = f"{gain:.1%} faster" if gain >= 0 else f"{-gain:.1%} slower"
        return f"{way} with it (noise ±{self.noise:.1%})"

    def why_not(self) -> str:
        """Why it does not help: it slows the forward beyond the noise, or its gain is within
        it (or under MIN_GAIN)."""
        if 1.0 - self.ratio > self.noise:
            return "slower beyond the noise"
        return "not beyond the noise"


@dataclass
class Ablation:
    """The outcome: what stays, what was dropped and why, and each target's effect."""

    mode: str
    candidates: list[str]
    kept: list[str]
    dropped: dict[str, str] = field(default_factory=dict)  # target -> why
    effects: dict[str, Effect] = field(default_factory=dict)  # first pass (all candidates in)
    kept_effects: dict[str, Effect] = field(default_factory=dict)  # last pass (the kept set)
    kept_ms: float | None = None  # forward with the kept set (last pass), None if none kept
    timings: int = 0  # forwards timed, the cost of the decision

    def to_json(self) -> dict:
        data = asdict(self)
        for key in ("effects", "kept_effects"):
            data[key] = {t: {**asdict(e), "helps": e.helps} for t, e in getattr(self, key).items()}
        return data


def ablate(candidates: Sequence[str], timer: Timer, mode: str, rounds: int = ROUNDS) -> Ablation:
    """Greedy backward elimination over `candidates` with `timer` (see the module docstring)."""
    result = Ablation(mode=mode, candidates=list(candidates), kept=list(candidates))
    current = list(candidates)
    while current:
        with_all = frozenset(current)
        sets = {"": with_all} | {t: with_all - {t} for t in current}
        samples = interleaved(list(sets), lambda k, s=sets: timer(s[k]), max(1, rounds))
        result.timings += len(sets) * max(1, rounds)
        effects = {t: effect(t, samples[""], samples[t]) for t in current}
        if not result.effects:
            result.effects = effects
        losers = [e for e in effects.values() if not e.helps]
        if not losers:
            result.kept_ms = statistics.median(samples[""])
            result.kept_effects = effects
            break
        worst = min(losers, key=lambda e: e.ratio)  # its removal speeds the forward most
        others = f" with {', '.join(sorted(with_all - {worst.target}))}" if len(current) > 1 else ""
        result.dropped[worst.target] = f"{worst.describe()}{others}: {worst.why_not()}"
        current.remove(worst.target)
    result.kept = current
    return result


def interleaved(keys: list[K], time: Callable[[K], float], rounds: int) -> dict[K, list[float]]:
    """Every key timed once per round, the order rotated each round so that no key always runs
    right after another (drift and warm caches fall on all of them alike)."""
    samples: dict[K, list[float]] = {k: [] for k in keys}
    for r in range(rounds):
        shift = r % max(1, len(keys))
        for k in keys[shift:] + keys[:shift]:
            samples[k].append(time(k))
    return samples


def effect(target: str, with_ms: list[float], without_ms: list[float]) -> Effect:
    ratios = [wo / w for w, wo in zip(with_ms, without_ms, strict=True) if w > 0]
    return Effect(
        target=target,
        ratio=statistics.median(ratios) if ratios else 1.0,
        noise=relative_half_spread(ratios),
        with_ms=statistics.median(with_ms),
        without_ms=statistics.median(without_ms),
    )
