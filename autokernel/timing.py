"""One timing path for the harness, the tuner and the benchmarks.

CUDA: triton.testing.do_bench with explicit quantiles, so the figure is the median (do_bench
returns the mean unless asked) with the L2 flushed before every repetition. CPU: perf_counter
median, labelled as a CPU figure: under the Triton interpreter it says nothing about GPU speed.
"""

from __future__ import annotations

import contextlib
import gc
import statistics
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass

import torch

WARMUP_MS = 25  # do_bench budgets, in milliseconds of GPU time
REP_MS = 100
CPU_BUDGET_S = 0.5  # CPU: stop repeating after this much time...
CPU_MIN_REPS = 3  # ...but never with fewer samples than this
CPU_MAX_REPS = 50
L2_FLUSH_BYTES = 256 * 1024 * 1024  # what do_bench zeroes before each repetition

CUDA_CLOCK = "cuda do_bench median (L2 flushed)"
CPU_CLOCK = "CPU perf_counter median (Triton interpreter: not a GPU figure)"


@dataclass(frozen=True)
class Measurement:
    median_us: float
    p20_us: float
    p80_us: float

    @property
    def spread_us(self) -> float:
        return self.p80_us - self.p20_us


@contextlib.contextmanager
def gc_paused() -> Iterator[None]:
    """Python's cyclic collector off while samples are taken, as timeit does: a collection that
    lands inside one sample adds its pause (milliseconds with a Hugging Face model's heap) to that
    sample alone, a host-side outlier in a host-bound forward's timing."""
    was = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was:
            gc.enable()


def measure(fn: Callable[[], object], on_gpu: bool) -> Measurement:
    with gc_paused():
        return _measure(fn, on_gpu)


def _measure(fn: Callable[[], object], on_gpu: bool) -> Measurement:
    if on_gpu:
        import triton.testing

        med, p20, p80 = triton.testing.do_bench(
            fn, warmup=WARMUP_MS, rep=REP_MS, quantiles=[0.5, 0.2, 0.8]
        )
        return Measurement(med * 1e3, p20 * 1e3, p80 * 1e3)
    fn()  # warm: compile/trace outside the samples
    samples: list[float] = []
    start = time.perf_counter()
    while len(samples) < CPU_MIN_REPS or (
        time.perf_counter() - start < CPU_BUDGET_S and len(samples) < CPU_MAX_REPS
    ):
        t0 = time.perf_counter()
        fn()
        samples.append((time.perf_counter() - t0) * 1e6)
    q = statistics.quantiles(samples, n=5) if len(samples) > 1 else samples * 4
    return Measurement(statistics.median(samples), q[0], q[3])


def clock_name(on_gpu: bool) -> str:
    return CUDA_CLOCK if on_gpu else CPU_CLOCK


def wall_per_call_us(fn: Callable[[], object], on_gpu: bool, calls: int = 20) -> float:
    """Host wall time per call with the device drained before and after: counts work on every
    stream, unlike events recorded on the current one. Compared against `measure` to catch
    work hidden on a side stream."""
    if on_gpu:
        torch.cuda.synchronize()
    t0 = time.perf_counter()
    for _ in range(calls):
        fn()
    if on_gpu:
        torch.cuda.synchronize()
    return (time.perf_counter() - t0) / calls * 1e6


def host_per_call_us(fn: Callable[[], object], on_gpu: bool, calls: int = 200) -> float:
    """Host time per call, the calls queued without waiting for the device: the Python and
    launch cost a caller pays. A kernel whose host time exceeds its device time is host-bound
    at that size (seen on the H200: 35-75 us per call for row kernels of under 40 us)."""
    if on_gpu:
        torch.cuda.synchronize()
    t0 = time.perf_counter()
    for _ in range(calls):
        fn()
    host = (time.perf_counter() - t0) / calls * 1e6
    if on_gpu:
        torch.cuda.synchronize()
    return host


def single_calls_us(
    fn: Callable[[], object], before: Callable[[int], None], on_gpu: bool, calls: int
) -> list[float]:
    """Time `calls` single calls of fn, each after before(i) (e.g. new input values) ran outside
    the timed region. CUDA: events on the current stream around each call, after an L2 flush as
    do_bench does, so a figure is comparable with `measure`; the flush (and before's own GPU work)
    keeps the GPU busy while the host launches fn, so launch latency stays hidden as it does in
    do_bench's loop. CPU: perf_counter around each call."""
    times: list[float] = []
    if not on_gpu:
        for i in range(calls):
            before(i)
            t0 = time.perf_counter()
            fn()
            times.append((time.perf_counter() - t0) * 1e6)
        return times
    flush = torch.empty(L2_FLUSH_BYTES // 4, dtype=torch.int32, device="cuda")
    events = [
        (torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True))
        for _ in range(calls)
    ]
    for i, (start, end) in enumerate(events):
        before(i)
        flush.zero_()
        start.record()
        fn()
        end.record()
    torch.cuda.synchronize()
    return [start.elapsed_time(end) * 1e3 for start, end in events]
