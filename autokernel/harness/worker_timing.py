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
    slowed down); slowing down on purpose for the second look gains nothing."""
    slack = FRESH_SLACK_US[on_gpu]
    fresh: list[float] = []
    for attempt in range(2):

        def before(i: int, attempt: int = attempt) -> None:
            refill(("fresh", attempt, i))

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


class Sampled:
    """fn, keeping the outputs of SAMPLED_OUTPUTS of its calls chosen uniformly at random
    (reservoir sampling: how many calls the timing makes is not known ahead), each with the key
    of the inputs it was computed from (`source()`: None for the last checked call's own).

    Why: a kernel can count its calls. At a benchmark size the judge's checked call comes
    first, then a fixed number of timed calls on the same buffers, then the judge's batch; a
    kernel that did a fraction of its work in the calls between passed, within the wall-clock
    limit of 3x plus 2 ms on the CPU (2x plus 30 us on a GPU). No call of the timing can be
    told from a checked one once any of them may be checked."""

    def __init__(self, fn: Callable[[], object], source: Callable[[], tuple | None]) -> None:
        self.fn, self.source = fn, source
        self.k, self.calls = SAMPLED_OUTPUTS, 0
        self.kept: list[tuple[tuple | None, object]] = []
        self.rng = random.Random(secrets.randbits(64))

    def __call__(self) -> object:
        out = self.fn()
        self.calls += 1
        if self.calls == 1 and _nbytes(out) > SAMPLED_BIG_BYTES:
            self.k = 1
        if len(self.kept) < self.k:
            self.kept.append((self.source(), out))
        else:
            j = self.rng.randrange(self.calls)
            if j < self.k:
                self.kept[j] = (self.source(), out)
        return out


def _nbytes(out: object) -> int:
    return out.numel() * out.element_size() if type(out) is torch.Tensor else 0
