"""The timed calls, run in the candidate's process on the judge's request.

Two checks stay here because they need the timed buffers between calls: hidden work (wall time
far above the event-timed figure: work on a side stream) and fresh data (calls timed with new
values written into the very tensors that were timed must not be much slower than the timed
figure: an output cached by address plus a few sampled values is fast only while nothing
changes). Both guard against an honest-looking kernel's tricks; a hostile process could skip
them, which is why every figure reported here is cross-checked by the judge's own clock
(benchmark.cross_check) and every output it hands back is checked by the judge.
"""

from __future__ import annotations

import statistics
from collections.abc import Callable

from autokernel.timing import Measurement, measure, single_calls_us, wall_per_call_us

HIDDEN_WORK_FACTOR = 3.0  # wall time this many times the event time...
HIDDEN_WORK_SLACK_US = 200.0  # ...plus launch overheads counts as hidden work
FRESH_CALLS = 5  # calls timed on new input values after the median was measured
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
    """Time calls on new values in the timed buffers and return the figure to report.

    An honest kernel takes as long on new values as on the unchanged ones the timed loop re-uses.
    A slow first try is looked at again against a median measured now (a shared CPU may have
    slowed down), and that median is what gets reported: slowing down on purpose for the second
    look gains nothing."""
    slack = FRESH_SLACK_US[on_gpu]
    fresh_us = 0.0
    for attempt in range(2):

        def before(i: int, attempt: int = attempt) -> None:
            refill(("fresh", attempt, i))

        fresh_us = statistics.median(single_calls_us(fn, before, on_gpu, FRESH_CALLS))
        if fresh_us <= FRESH_FACTOR * m.median_us + slack:
            return m
        if attempt == 0:
            m = measure(fn, on_gpu)
    raise TimingRejected(
        "the kernel is much slower when its input values change between calls (output "
        f"cached?): {fresh_us:.1f} us per call on new values vs {m.median_us:.1f} us timed on "
        f"unchanged ones (limit {FRESH_FACTOR:g}x + {slack:g} us)"
    )


def time_calls(fn: Callable[[], object], refill: Callable[[tuple], None], on_gpu: bool):
    """The median and spread to claim for fn, after the two checks above."""
    m = measure(fn, on_gpu)
    if on_gpu:
        hidden_work(fn, m)
    return fresh_data(fn, refill, on_gpu, m)
