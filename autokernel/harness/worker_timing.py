"""The timed calls, run in the candidate's process on the judge's request.

Two checks stay here because they need the timed buffers between calls: hidden work (wall time
far above the event-timed figure: work on a side stream) and fresh data (calls timed with new
values written into the very tensors that were timed). The figure claimed is the slower of the
timed loop's median and the fresh calls' median: do_bench re-uses one set of input values, and a
kernel that keeps its output for unchanged values (keyed by address and a few sampled values)
would read as a launch there. Below a small kernel's time the judge's clock cannot tell such a
claim apart (its slack is tens of microseconds), so the fresh calls, on new values every time,
set the figure instead of only bounding it. Both checks guard against an honest-looking kernel's
tricks; a hostile process could skip them, which is why every figure reported here is
cross-checked by the judge's own clock (benchmark.cross_check) and every output it hands back is
checked by the judge.
"""

from __future__ import annotations

import random
import secrets
import statistics
from collections.abc import Callable

import torch

from autokernel.harness.guards import TorchOpMonitor
from autokernel.timing import Measurement, measure, single_calls_us, wall_per_call_us

HIDDEN_WORK_FACTOR = 3.0  # wall time this many times the event time...
HIDDEN_WORK_SLACK_US = 200.0  # ...plus launch overheads counts as hidden work
# calls timed on new input values after the median was measured: on a GPU enough for a median
# as steady as do_bench's (each costs a refill and an L2 flush); the interpreter is slow
FRESH_CALLS = {True: 15, False: 5}
FRESH_FACTOR = 3.0  # their median above this many times the timed median...
# ...plus this slack (GPU: a launch gap the flush failed to hide; CPU: interpreter noise) is a cache
FRESH_SLACK_US = {True: 50.0, False: 2000.0}


class TimingRejected(Exception):
    """The timed calls show a trick: the message says which."""


def hidden_work(fn: Callable[[], object], m: Measurement) -> None:
    wall = wall_per_call_us(fn, True)
    if wall > HIDDEN_WORK_FACTOR * m.median_us + HIDDEN_WORK_SLACK_US:
        raise TimingRejected(
            f"wall time {wall:.1f} us per call vs {m.median_us:.1f} us on the current "
            "stream's events: work is running outside the timed stream"
        )


def fresh_data(
    fn: Callable[[], object], refill: Callable[[tuple], None], on_gpu: bool, m: Measurement
) -> Measurement:
    """Time calls on new values in the timed buffers and return the figure to report: the
    slower of m and the fresh calls (see the module docstring).

    A kernel far slower on new values than on unchanged ones is refused outright (a cache). A
    slow first try is looked at again against a median measured now (a shared CPU may have
    slowed down); slowing down on purpose for the second look gains nothing.

    Two fresh calls of each try, chosen at random, always hand their output to the judge
    (Sampled.keep_next): a kernel that returned unwritten outputs from most fresh calls and
    computed them all in the last one had a copy's median here, and the reservoir alone rarely
    picks one of these few calls among a timing's thousands. Two distinct picks cannot both be
    the one call that did the work."""
    slack = FRESH_SLACK_US[on_gpu]
    fresh: list[float] = []
    for attempt in range(2):
        picks = set(random.Random(secrets.randbits(64)).sample(range(FRESH_CALLS[on_gpu]), 2))

        def before(i: int, attempt: int = attempt, picks: set[int] = picks) -> None:
            refill(("fresh", attempt, i))
            if i in picks and isinstance(fn, Sampled):
                fn.keep_next()

        fresh = single_calls_us(fn, before, on_gpu, FRESH_CALLS[on_gpu])
        if statistics.median(fresh) <= FRESH_FACTOR * m.median_us + slack:
            return slower(m, fresh)
        if attempt == 0:
            m = measure(fn, on_gpu)
    raise TimingRejected(
        "the kernel is much slower when its input values change between calls (output "
        f"cached?): {statistics.median(fresh):.1f} us per call on new values vs "
        f"{m.median_us:.1f} us timed on unchanged ones (limit {FRESH_FACTOR:g}x + {slack:g} us)"
    )


def slower(m: Measurement, fresh: list[float]) -> Measurement:
    """m, or the fresh calls' median and spread where that is slower."""
    median = statistics.median(fresh)
    if median <= m.median_us:
        return m
    q = statistics.quantiles(fresh, n=5) if len(fresh) > 1 else [median] * 4
    return Measurement(median, q[0], q[3])


def time_calls(fn: Callable[[], object], refill: Callable[[tuple], None], on_gpu: bool):
    """The median and spread to claim for fn, after the two checks above. The interleaved
    rounds of a comparison use it too, so a cached output wins no round either."""
    m = measure(fn, on_gpu)
    if on_gpu:
        hidden_work(fn, m)
    return fresh_data(fn, refill, on_gpu, m)


SAMPLED_OUTPUTS = 3  # outputs of timed calls, chosen at random, that the judge checks
SAMPLED_BIG_BYTES = 256 << 20  # beyond this output size, only one is kept (device memory)
FRESH_KEPT = 2  # outputs of fresh-value calls (keep_next) kept, chosen at random among those
# Timed calls watched by the op monitor: the first WATCHED_FIRST, then each with this chance.
WATCHED_FIRST = 2
WATCH_FRACTION = {True: 1 / 16, False: 1 / 4}


class Sampled:
    """fn, keeping a copy of the outputs of SAMPLED_OUTPUTS of its calls chosen uniformly at
    random (reservoir sampling: how many calls the timing makes is not known ahead), each with
    the key of the inputs it was computed from (`source()`: None for the last checked call's
    own), and watching a random sample of its calls with the op monitor.

    Why sample: a kernel can count its calls. At a benchmark size the judge's checked call comes
    first, then a fixed number of timed calls on the same buffers, then the judge's batch; a
    kernel that did a fraction of its work in the calls between passed, within the wall-clock
    limit of 3x plus 2 ms on the CPU (2x plus 30 us on a GPU). No call of the timing can be
    told from a checked one once any of them may be checked.

    Why a copy, taken as the call returns: a kept reference let a kernel return unwritten
    outputs and fill them in a later call, so the output was right when the judge read it and
    the call's own time was a copy's (tests/faults/matmul_deferred_work_in_timed_calls.py). A
    copy judges the output as the caller got it. It runs inside the sampled call's timed region,
    in a few dozen of a GPU timing's thousands of calls: the median does not see it.

    Why watch: the judge's checked calls and batch run under the op monitor, the timing loop
    did not (its host cost per call), so a kernel that told the loop apart (by counting calls)
    computed there with torch and claimed torch's time, which the judge's wall clock only
    bounded. The monitor costs a watched call host time (entering the mode, a Python dispatch
    per allocation): on a GPU do_bench's L2 flush before every call keeps the device busy while
    the host launches, and one call in 16 cannot move a median or a p20-p80; under the
    interpreter it is small beside a launch. The first calls are always watched (do_bench's
    warm-up on a GPU), so a cheat from the start is caught for certain, a later one with odds
    that grow with its share of the calls. `forbidden` lists the ops seen."""

    def __init__(
        self, fn: Callable[[], object], source: Callable[[], tuple | None], watch: float = 0.0
    ) -> None:
        self.fn, self.source, self.watch = fn, source, watch
        self.k, self.calls = SAMPLED_OUTPUTS, 0
        self.reservoir: list[tuple[tuple | None, object]] = []
        self.fresh: list[tuple[tuple | None, object]] = []
        self.picked, self.keep = 0, False
        self.forbidden: list[str] = []
        self.rng = random.Random(secrets.randbits(64))

    @property
    def kept(self) -> list[tuple[tuple | None, object]]:
        return [*self.reservoir, *self.fresh]

    def keep_next(self) -> None:
        """Keep the next call's output among the FRESH_KEPT fresh ones (reservoir over picks)."""
        self.keep = True

    def _call(self) -> object:
        watched = self.watch > 0 and (self.calls < WATCHED_FIRST or self.rng.random() < self.watch)
        if not watched:
            return self.fn()
        monitor = TorchOpMonitor()
        with monitor:
            out = self.fn()
        self.forbidden.extend(op for op in monitor.forbidden if op not in self.forbidden)
        return out

    def __call__(self) -> object:
        out = self._call()
        self.calls += 1
        if self.calls == 1 and _nbytes(out) > SAMPLED_BIG_BYTES:
            self.k = 1
        if self.keep:
            self.keep, self.picked = False, self.picked + 1
            _reservoir(self.fresh, FRESH_KEPT, self.picked, self.rng, self.source, out)
        _reservoir(self.reservoir, self.k, self.calls, self.rng, self.source, out)
        return out


def _reservoir(
    kept: list, k: int, seen: int, rng: random.Random, source: Callable[[], tuple | None],
    out: object,
) -> None:  # fmt: skip
    """Reservoir sampling step for the seen-th item: a copy of out kept with probability k/seen."""
    if len(kept) < k:
        kept.append((source(), _copy(out)))
        return
    j = rng.randrange(seen)
    if j < k:
        kept[j] = (source(), _copy(out))


def _copy(out: object) -> object:
    """A copy of an output as it is now (anything else is kept as it is: the judge refuses it)."""
    return torch.Tensor.clone(out) if type(out) is torch.Tensor else out


def _nbytes(out: object) -> int:
    return out.numel() * out.element_size() if type(out) is torch.Tensor else 0
