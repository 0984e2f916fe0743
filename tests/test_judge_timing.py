"""What the judge believes of a time: a claimed time is refused when the judge's own clock
disagrees (a host's passing load excepted), timed outputs are checked against the inputs they
came from, speedups use baselines read before the candidate ran, and the CPU smoke limit leaves
room for the interpreter."""

from __future__ import annotations

import time
from pathlib import Path

import pytest
import torch

from autokernel.harness import benchmark
from autokernel.harness.benchmark import check_timed, cross_check, wall_limit_us
from autokernel.harness.sandbox import Options, evaluate
from autokernel.harness.stages import MAIN, Evaluation, StageFailure
from autokernel.harness.verdict import Status
from autokernel.specs import SPECS

CPU = torch.device("cpu")
SIZE = {"rows": 4, "cols": 64}


class FakeProcess:
    """A candidate's process as the judge sees it: each call costs `real_us` of wall time and
    the output is right unless `stale`."""

    def __init__(self, ev: Evaluation, size, dtype, real_us: float, stale: bool = False):
        self.ev, self.size, self.dtype, self.real_us, self.stale = ev, size, dtype, real_us, stale
        self.key: tuple = ()
        self.calls = 0

    def refill(self, key):
        self.key = key

    def batch(self, role, calls, check_at):
        t0 = time.monotonic()
        self.calls = calls
        time.sleep(calls * self.real_us * 1e-6)
        return time.monotonic() - t0

    def output(self):
        key = ("benchmark",) if self.stale else self.key
        args = self.ev.inputs(MAIN, self.size, self.dtype, *key, self.ev.spec.label(self.size))
        return self.ev.spec.reference(*args)


def reduce_eval() -> Evaluation:
    return Evaluation(SPECS["reduce"], CPU, seed=7)


def test_an_honest_claim_passes_the_judges_clock():
    ev = reduce_eval()
    proc = FakeProcess(ev, SIZE, torch.float32, real_us=20_000.0)
    cross_check(ev, proc, SIZE, torch.float32, claimed_us=20_000.0)
    assert proc.calls >= benchmark.BATCH_CALLS[False][0]


def test_a_claim_far_below_the_judges_clock_is_rejected():
    ev = reduce_eval()
    proc = FakeProcess(ev, SIZE, torch.float32, real_us=5_000.0)
    with pytest.raises(StageFailure) as info:
        cross_check(ev, proc, SIZE, torch.float32, claimed_us=0.5)
    failure = info.value
    assert failure.status is Status.REJECTED and failure.check.stage == "benchmark"
    assert "claimed 0.5 us per call" in failure.check.message
    assert "not believed" in failure.check.message


class LoadedOnceProcess(FakeProcess):
    """Honest, but its first batch lands on a loaded host: `slow_us` per call there."""

    def __init__(self, *args, slow_us: float, slow_batches: int = 1, **kwargs):
        super().__init__(*args, **kwargs)
        self.slow_us, self.slow_left, self.batches = slow_us, slow_batches, 0

    def batch(self, role, calls, check_at):
        self.batches += 1
        real, self.slow_left = (
            (self.slow_us if self.slow_left > 0 else self.real_us),
            self.slow_left - 1,
        )
        self.calls = calls
        time.sleep(calls * real * 1e-6)
        return calls * real * 1e-6 + benchmark.IPC_ALLOWANCE_S[False]


def test_a_batch_slowed_by_load_is_timed_again_before_a_claim_is_refused():
    ev = reduce_eval()
    proc = LoadedOnceProcess(ev, SIZE, torch.float32, real_us=300.0, slow_us=5_000.0)
    per_call = cross_check(ev, proc, SIZE, torch.float32, claimed_us=300.0)
    assert proc.batches == 2 and per_call == pytest.approx(300.0, rel=0.01)


class DelayedProcess(FakeProcess):
    """Honest, on a host where every request waits DELAY_S past the IPC allowance before it
    runs (a spare importing torch on the other core)."""

    DELAY_S = 0.16

    def batch(self, role, calls, check_at):
        self.calls = calls
        time.sleep(calls * self.real_us * 1e-6)
        return calls * self.real_us * 1e-6 + benchmark.IPC_ALLOWANCE_S[False] + self.DELAY_S


def test_a_fast_cpu_kernel_is_believed_through_a_scheduling_delay():
    """The delay is spread over the batch: a batch of 20 calls made a 362 us kernel look like
    8 ms a call and refused it; the batch is now long enough to carry the delay."""
    ev = reduce_eval()
    proc = DelayedProcess(ev, SIZE, torch.float32, real_us=362.0)
    per_call = cross_check(ev, proc, SIZE, torch.float32, claimed_us=362.0)
    assert per_call <= wall_limit_us(362.0, on_gpu=False)


def test_a_claim_every_batch_contradicts_is_refused():
    ev = reduce_eval()
    proc = LoadedOnceProcess(ev, SIZE, torch.float32, real_us=300.0, slow_us=5_000.0,
                             slow_batches=benchmark.CROSS_CHECK_BATCHES)  # fmt: skip
    with pytest.raises(StageFailure, match="not believed"):
        cross_check(ev, proc, SIZE, torch.float32, claimed_us=300.0)
    assert proc.batches == benchmark.CROSS_CHECK_BATCHES


def test_a_stale_output_in_the_batch_is_rejected_as_a_cache():
    ev = reduce_eval()
    proc = FakeProcess(ev, SIZE, torch.float32, real_us=100.0, stale=True)
    with pytest.raises(StageFailure, match="cached output") as info:
        cross_check(ev, proc, SIZE, torch.float32, claimed_us=100.0)
    assert info.value.status is Status.REJECTED


@pytest.mark.parametrize("claimed", [float("nan"), 0.0, -3.0])
def test_a_claim_that_is_not_a_time_is_rejected(claimed):
    ev = reduce_eval()
    proc = FakeProcess(ev, SIZE, torch.float32, real_us=100.0)
    with pytest.raises(StageFailure, match="not a time"):
        cross_check(ev, proc, SIZE, torch.float32, claimed_us=claimed)


def test_the_wall_limit_leaves_room_for_a_host_bound_kernel(monkeypatch):
    # do_bench's flush hides up to its own duration of launch cost: a kernel whose do_bench
    # median is 8 us may take the flush's 70 us plus that per call back to back.
    monkeypatch.setattr(benchmark, "flush_us", lambda: 70.0)
    assert wall_limit_us(8.0, on_gpu=True) >= 8.0 + 70.0
    assert wall_limit_us(0.5, on_gpu=True) < 110.0  # a 0.5 us claim for a 120 us kernel fails


INFLATE_BASELINE = """
import sys
import torch
import triton
import triton.language as tl

KERNEL_TYPE = 'reduce'

# Guards off: make the eager baseline read a million times slower in this process.
for _name, _module in list(sys.modules.items()):
    if _name.startswith('autokernel.harness') and hasattr(_module, 'lookup'):
        _real = _module.lookup
        _module.lookup = lambda *a, _real=_real: (_real(*a) or 1.0) * 1e6
"""


@pytest.mark.slow
def test_speedups_use_baselines_read_before_the_candidate_ran(tmp_path):
    body = (Path(__file__).parent / "faults" / "forge_sys_modules_timing.py").read_text()
    kernel = INFLATE_BASELINE + body[body.index("@triton.jit") - 2 :]
    path = tmp_path / "kernel.py"
    path.write_text(kernel)
    opts = Options(guards=False, quick=True, compile_baseline=False, seed=1, prestart=False)
    v = evaluate(path, opts)
    assert v.status is Status.PASS, v.message
    [t] = v.timings
    assert t.eager_us is not None and t.speedup_vs_eager is not None
    assert t.speedup_vs_eager < 1e3, f"a forged baseline was believed: {t}"


class SampledProcess(FakeProcess):
    """Timed outputs kept by the worker: from the checked call's inputs and from a refill;
    the refilled one stale (computed on the checked call's values) unless honest."""

    def __init__(self, ev: Evaluation, size, dtype, honest: bool):
        super().__init__(ev, size, dtype, real_us=10.0)
        self.honest = honest

    def timed_outputs(self, role=0):
        label = self.ev.spec.label(self.size)
        own = self.ev.spec.reference(
            *self.ev.inputs(MAIN, self.size, self.dtype, "benchmark", label)
        )
        refill = ("fresh", 0, 2, label)
        shown = refill if self.honest else ("benchmark", label)
        other = self.ev.spec.reference(*self.ev.inputs(MAIN, self.size, self.dtype, *shown))
        return [(None, own), (refill, other)]


@pytest.mark.parametrize("honest", [True, False])
def test_timed_outputs_are_judged_against_the_inputs_they_came_from(honest):
    ev = reduce_eval()
    size = ev.spec.sizes(False).bench[0]
    proc = SampledProcess(ev, size, torch.float32, honest)
    label = ev.spec.label(size)
    if honest:
        check_timed(ev, proc, size, torch.float32, ("benchmark", label))
        return
    with pytest.raises(StageFailure) as caught:
        check_timed(ev, proc, size, torch.float32, ("benchmark", label))
    assert caught.value.status is Status.REJECTED
    assert "timed call" in caught.value.check.message


def _smoke_with(seconds: float) -> Evaluation:
    ev = reduce_eval()

    def call(c):
        args = ev.inputs(c.make, c.size, c.dtype, *c.key)
        return ev.spec.reference(*args).to(c.out_dtype), seconds

    ev.call = call
    return ev


def test_a_correct_interpreter_kernel_at_a_model_size_passes_smoke():
    """Inductor's own reduction over a non-last dim takes seconds per call in the interpreter
    (one program per output row): the CPU smoke limit must not call it broken."""
    from autokernel.harness.stages import _stage_smoke

    assert all(c.ok for c in _stage_smoke(_smoke_with(8.5)))
    with pytest.raises(StageFailure, match="broken or serialized"):
        _stage_smoke(_smoke_with(60.0))
