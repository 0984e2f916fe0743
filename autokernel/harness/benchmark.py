"""Time a candidate that passed all five stages, from the judge's side, and refuse faked speed.

The candidate's process measures (worker_timing.py: median and spread, with its hidden-work and
fresh-data checks); the judge does not believe the figure until its own clock agrees. For each
size it writes new values into the timed buffers, asks for a batch of back-to-back calls on them,
times that request with its own monotonic clock, and checks one output of the batch (chosen at
random) against its own reference: an output cached by address or by call count fails there,
and a claimed median far below the judge's wall time per call is REJECTED. Plausibility (faster
than the machine's measured ceiling) is checked here too.

What the judge's clock cannot tell apart: a claim within WALL_FACTOR of the truth plus the slack
(do_bench's L2 flush hides up to its own duration of a host-bound kernel's launch cost, so an
honest host-bound kernel's wall time per call exceeds its do_bench median by up to that much).
"""

from __future__ import annotations

import functools
import math
import secrets
from dataclasses import dataclass, fields
from typing import Any, Protocol

import torch

from autokernel.harness.compare import compare, describe, shape_dtype_error
from autokernel.harness.stages import (
    MAIN,
    Evaluation,
    StageFailure,
    call_checked,
    expected_output,
)
from autokernel.harness.verdict import Check, Status, Timing
from autokernel.specs import KernelSpec, Size, dtype_name
from autokernel.stats import geomean as geomean  # re-exported for the judge
from autokernel.timing import L2_FLUSH_BYTES, Measurement

PLAUSIBLE_FRACTION = 1.10  # above 110 % of a measured ceiling, a figure is not believed
# The judge's cross-check: a batch of calls long enough (BATCH_S at the claimed speed, within
# BATCH_CALLS) that the request's own cost (IPC_ALLOWANCE_S: a pipe round trip and a process
# wake-up, 1-10 ms on a busy host) is small beside it. A claim is refused when the judge's wall
# time per call exceeds WALL_FACTOR x the claim + the slack. GPU: back-to-back calls run at most
# at max(host time, device time), and do_bench's median is at least the device time and at
# least the host time minus the L2 flush that precedes each timed call (the GPU is busy with it
# while the host launches), so an honest kernel stays under 1x + flush time; 2x and 30 us more
# absorb clocks and scheduling. CPU (interpreter, two shared cores): per-call times vary 2x under
# load, so 3x plus 2 ms. The CPU batch is at most 100 calls: with 20, a correct 362 us kernel
# was refused at 3209 us a call (limit 3087) while a spare imported torch beside it, about 160
# ms of scheduling delay spread over a 7 ms batch; 100 calls spread it five times thinner. More
# would make a kernel that claims 1 us but takes a second of interpreter time hold the judge
# for minutes before it is refused.
BATCH_S = {True: 0.05, False: 0.3}
BATCH_CALLS = {True: (10, 1000), False: (3, 100)}
IPC_ALLOWANCE_S = {True: 0.02, False: 0.1}
WALL_FACTOR = {True: 2.0, False: 3.0}
WALL_MARGIN_US = {True: 30.0, False: 2000.0}
# Load only ever adds wall time, so the judge takes the best of up to this many batches: a
# correct kernel took 4.8 ms per call in one batch against a 3.0 ms limit while the CPU suite ran
# beside it, and a kernel with hidden work carries that work into every batch.
CROSS_CHECK_BATCHES = 3


class KernelProcess(Protocol):
    """The judge's handle on the candidate's process (judge.Remote)."""

    def measure(self, role: int, label: str, dtype: torch.dtype) -> Measurement: ...
    def refill(self, key: tuple) -> None: ...
    def batch(self, role: int, calls: int, check_at: int) -> float: ...
    def output(self) -> torch.Tensor: ...
    def timed_outputs(self, role: int = 0) -> list[tuple[tuple | None, torch.Tensor]]: ...


@dataclass(frozen=True)
class Peaks:
    """Ceilings for % of peak: bandwidth in GB/s and matrix rate in TFLOPS for the dtype."""

    gbs: float | None
    tflops: float | None
    # The datasheet's figures: a ceiling measured while another process shared the GPU is low
    # for good (an H100's copy read 2380 GB/s so, 2930 alone), and a correct kernel above it
    # must not be called implausible. A figure is disbelieved only above both.
    datasheet_gbs: float | None = None
    datasheet_tflops: float | None = None

    def plausible_limit(self, unit: str, peak: float | None) -> float | None:
        """The highest believable rate in `unit`: PLAUSIBLE_FRACTION of the larger of the
        effective peak and the datasheet."""
        sheet = self.datasheet_gbs if unit == "GB/s" else self.datasheet_tflops
        known = [x for x in (peak, sheet) if x]
        return PLAUSIBLE_FRACTION * max(known) if known else None


PEAK_FIELDS = tuple(f.name for f in fields(Peaks))  # what the trusted worker's reply may carry


def effective_peak(ceiling: float | None, work: float, *baseline_us: float | None) -> float | None:
    """The machine's measured ceiling, raised to what a baseline reached at this very size:
    cuBLAS does 781 TFLOPS on an 8192x32000x2048 bf16 product on the H200 where the ceiling's
    own shape reached 710-760, and a kernel cannot be "at 90 % of peak" while a library call
    beats it. `work` is throughput x µs (bytes or flops in the unit's scale)."""
    rates = [work / us for us in baseline_us if us]
    return max([ceiling, *rates]) if ceiling else ceiling


def bench_sizes(
    spec: KernelSpec, on_gpu: bool, quick: bool, extra: tuple[Size, ...] = ()
) -> tuple[Size, ...]:
    """The spec's benchmark sizes, then the plan's, each once: a size timed twice would find
    its inputs refilled by the first timing's re-validation while the judge rebuilds them from
    the key, and fail a correct kernel."""
    sizes = spec.sizes(on_gpu).bench
    out: dict[str, Size] = {}
    for size in (*(sizes[:1] if quick else sizes), *extra):
        out.setdefault(spec.label(size), size)
    return tuple(out.values())


def _reject(size: str, dtype: torch.dtype, message: str) -> StageFailure:
    return StageFailure(
        Status.REJECTED, Check("benchmark", size, dtype_name(dtype), False, message)
    )


@functools.cache
def flush_us() -> float:
    """How long this GPU takes to zero do_bench's L2 flush buffer: the most host time its
    median can hide. Measured by the judge, in its own process."""
    buf = torch.empty(L2_FLUSH_BYTES // 4, dtype=torch.int32, device="cuda")
    times = []
    for _ in range(5):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        buf.zero_()
        end.record()
        torch.cuda.synchronize()
        times.append(start.elapsed_time(end) * 1e3)
    return sorted(times)[len(times) // 2]


def batch_calls(claimed_us: float, on_gpu: bool) -> int:
    lo, hi = BATCH_CALLS[on_gpu]
    return int(min(hi, max(lo, math.ceil(BATCH_S[on_gpu] / (claimed_us * 1e-6)))))


def wall_limit_us(claimed_us: float, on_gpu: bool) -> float:
    slack = WALL_MARGIN_US[on_gpu] + (flush_us() if on_gpu else 0.0)
    return WALL_FACTOR[on_gpu] * claimed_us + slack


def cross_check(
    ev: Evaluation, proc: KernelProcess, size: Size, dtype: torch.dtype, claimed_us: float,
    role: int = 0,
) -> float:  # fmt: skip
    """Refuse a claimed median that the judge's own clock, or a checked output, contradicts;
    return the judge's wall time per call."""
    label = ev.spec.label(size)
    if not (math.isfinite(claimed_us) and claimed_us > 0):
        raise _reject(label, dtype, f"the candidate's process claimed {claimed_us!r} us per "
                      "call: not a time")  # fmt: skip
    limit = wall_limit_us(claimed_us, ev.on_gpu)
    best = math.inf
    for _ in range(CROSS_CHECK_BATCHES):
        calls, wall_s = _checked_batch(ev, proc, size, dtype, claimed_us, role)
        best = min(best, max(0.0, wall_s - IPC_ALLOWANCE_S[ev.on_gpu]) / calls * 1e6)
        if best <= limit:
            return best
    raise _reject(
        label, dtype,
        f"the kernel's process claimed {claimed_us:.1f} us per call, but {calls} calls took "
        f"at best {best:.1f} us per call on the judge's clock over {CROSS_CHECK_BATCHES} "
        f"batches (limit {limit:.1f}): the claimed time is not believed",
    )  # fmt: skip


def _checked_batch(
    ev: Evaluation, proc: KernelProcess, size: Size, dtype: torch.dtype, claimed_us: float,
    role: int,
) -> tuple[int, float]:  # fmt: skip
    """One batch on fresh values in the same input buffers: (calls, wall seconds), the output
    checked against them (a kernel replaying a cached output is refused here)."""
    label = ev.spec.label(size)
    key = ("revalidate", secrets.randbelow(2**31))
    proc.refill(key)
    expected = expected_output(ev, MAIN, size, dtype, (*key, label))
    calls = batch_calls(claimed_us, ev.on_gpu)
    wall_s = proc.batch(role, calls, secrets.randbelow(calls))
    got = proc.output()
    out_dtype = ev.spec.out_dtype(dtype)
    atol, rtol = ev.spec.tolerance(dtype)
    problem = shape_dtype_error(got, expected, out_dtype)
    mismatch = None if problem else compare(got, expected, atol, rtol)
    if problem or mismatch:
        raise _reject(label, dtype, "after timing, new values were written into the same input "
                      "buffers and the output did not follow them (cached output?): "
                      + (problem or describe(mismatch, atol, rtol)))  # fmt: skip
    return calls, wall_s


def check_timed(
    ev: Evaluation, proc: KernelProcess, size: Size, dtype: torch.dtype, key: tuple,
    role: int = 0,
) -> None:  # fmt: skip
    """Judge the outputs of timed calls the worker kept at random (worker_timing.Sampled):
    `key` names the inputs of the checked call the timing re-used, a refill its own."""
    label = ev.spec.label(size)
    out_dtype = ev.spec.out_dtype(dtype)
    atol, rtol = ev.spec.tolerance(dtype)
    for source, got in proc.timed_outputs(role):
        expected = expected_output(ev, MAIN, size, dtype, source or key)
        problem = shape_dtype_error(got, expected, out_dtype)
        mismatch = None if problem else compare(got, expected, atol, rtol)
        if problem or mismatch:
            raise _reject(label, dtype, "the output of a timed call (one chosen at random) is "
                          "wrong, though the checked calls were right: the kernel tells timed "
                          "calls from checked ones: "
                          + (problem or describe(mismatch, atol, rtol)))  # fmt: skip


def time_candidate(
    ev: Evaluation, proc: KernelProcess, dtype: torch.dtype, peaks: Peaks,
    baselines: dict[str, dict[str, Any]],
) -> list[Timing]:  # fmt: skip
    timings = []
    for size in bench_sizes(ev.spec, ev.on_gpu, ev.quick, ev.extra_sizes):
        label = ev.spec.label(size)
        key = ("benchmark", label)
        # The first call at this size is judged like any stage check, so a plain bug on a path
        # only benchmark sizes take is a FAIL, not mistaken for a cache by the re-validation.
        expected = expected_output(ev, MAIN, size, dtype, key)
        call_checked(ev, "benchmark", MAIN, size, dtype, key, expected)
        del expected
        m = proc.measure(0, label, dtype)
        check_timed(ev, proc, size, dtype, key)
        wall_us = cross_check(ev, proc, size, dtype, m.median_us)
        base = baselines.get(label, {})
        t = _timing(ev.spec, size, dtype, m.median_us, m.spread_us, peaks,
                    base.get("eager"), base.get("compile"))  # fmt: skip
        t.judge_wall_us = wall_us
        timings.append(t)
        problem = implausible(t, peaks)
        if problem:
            raise _reject(label, dtype, problem)
    return timings


def implausible(t: Timing, peaks: Peaks) -> str | None:
    """Why a timing is not believed (faster than the hardware allows), or None."""
    peak = 100.0 * t.throughput / t.pct_peak if t.pct_peak else None
    limit = peaks.plausible_limit(t.unit, peak)
    if limit is None or t.throughput <= limit:
        return None
    return (
        f"{t.throughput:.1f} {t.unit} is {t.pct_peak or 0:.0f}% of this machine's measured "
        f"ceiling and above {limit:.0f} {t.unit} ({100 * PLAUSIBLE_FRACTION:.0f}% of the larger "
        "of it and the datasheet): not physically plausible, so not believed"
    )


def _timing(
    spec: KernelSpec,
    size: Size,
    dtype: torch.dtype,
    us: float,
    spread: float,
    peaks: Peaks,
    eager: float | None,
    compiled: float | None,
) -> Timing:
    """The reported figures at one size; eager and compiled are the baselines' medians, read
    before the candidate was imported."""
    if spec.bound == "memory":
        throughput, unit, peak = spec.bytes_moved(size, dtype) / us / 1e3, "GB/s", peaks.gbs
    else:
        throughput, unit, peak = spec.flops(size) / us / 1e6, "TFLOPS", peaks.tflops
    peak = effective_peak(peak, throughput * us, eager, compiled)
    return Timing(
        size=spec.label(size),
        dtype=dtype_name(dtype),
        us=us,
        spread_us=spread,
        eager_us=eager,
        compile_us=compiled,
        throughput=throughput,
        unit=unit,
        pct_peak=100.0 * throughput / peak if peak else None,
        speedup_vs_eager=eager / us if eager else None,
        speedup_vs_compile=compiled / us if compiled else None,
    )
