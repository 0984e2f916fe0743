"""The determinism stage against kernels that keep tensors between calls (stages.py,
retention.py): a replay cache of any size is caught, a bounded workspace passes.

softmax_nondeterministic_replay_all.py in tests/faults/ keeps every input and output (caught by
its growth); here a cache bounded to a few entries (caught by the calls on other inputs it is
sized to), a correct kernel with a per-shape workspace (must pass), and the stage's own rules on
a fake caller (fast, no worker).
"""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from autokernel.harness.sandbox import Options, evaluate
from autokernel.harness.stages import EVICTIONS_MAX, Evaluation, StageFailure, _stage_determinism
from autokernel.harness.verdict import Status
from autokernel.specs import resolve

FAULT = Path(__file__).parent / "faults" / "softmax_nondeterministic_replay_all.py"
SEED = 1234

# A correct softmax in two launches that shares a per-(rows, dtype) workspace across calls: the
# row maxima of the last call stay in it, bounded by the shapes it has seen, not the inputs.
WORKSPACE = """
import torch
import triton
import triton.language as tl

KERNEL_TYPE = "softmax"
WORK = {}


@triton.jit
def _row_max(X, M, stride, n_cols, BLOCK: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    cols = tl.arange(0, BLOCK)
    x = tl.load(X + row * stride + cols, mask=cols < n_cols, other=-float("inf"))
    tl.store(M + row, tl.max(x.to(tl.float32), axis=0))


@triton.jit
def _softmax(X, Y, M, stride, n_cols, BLOCK: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    cols = tl.arange(0, BLOCK)
    mask = cols < n_cols
    x = tl.load(X + row * stride + cols, mask=mask, other=-float("inf")).to(tl.float32)
    e = tl.exp(x - tl.load(M + row))
    tl.store(Y + row * stride + cols, (e / tl.sum(e, axis=0)).to(Y.dtype.element_ty), mask=mask)


def kernel_fn(x):
    n_cols = x.shape[-1]
    x2 = x.reshape(-1, n_cols).contiguous()
    key = (x2.shape[0], x.device)
    if key not in WORK:
        WORK[key] = torch.empty(x2.shape[0], dtype=torch.float32, device=x.device)
    y = torch.empty_like(x2)
    block = triton.next_power_of_2(n_cols)
    _row_max[(x2.shape[0],)](x2, WORK[key], x2.stride(0), n_cols, BLOCK=block)
    _softmax[(x2.shape[0],)](x2, y, WORK[key], x2.stride(0), n_cols, BLOCK=block)
    return y.view(x.shape)
"""


def _evaluate(path: Path):
    return evaluate(path, Options(timing=False, compile_baseline=False, seed=SEED))


@pytest.mark.slow
def test_a_bounded_replay_cache_is_evicted(tmp_path):
    """The fault's cache cut to its four newest entries: it no longer grows, and the calls on
    other inputs the stage sizes by what it holds push "a" out of it."""
    source = FAULT.read_text().replace(
        "    KEPT.append((x2.clone(), y.clone()))",
        "    KEPT.append((x2.clone(), y.clone()))\n    del KEPT[:-4]",
    )
    assert "del KEPT[:-4]" in source
    path = tmp_path / "kernel.py"
    path.write_text(source)
    verdict = _evaluate(path)
    assert verdict.status is Status.FAIL, verdict.message
    assert verdict.failure is not None and verdict.failure.stage == "determinism"
    assert "calls on other inputs between them" in verdict.message, verdict.message


@pytest.mark.slow
def test_a_correct_kernel_with_a_workspace_passes(tmp_path):
    path = tmp_path / "kernel.py"
    path.write_text(WORKSPACE)
    verdict = _evaluate(path)
    assert verdict.status is Status.PASS, verdict.message


class _Fake:
    """A caller that returns the reference and holds `per_call` more bytes after each call."""

    def __init__(self, spec, base: int, per_call: int) -> None:
        self.spec, self.calls, self.base, self.per_call = spec, [], base, per_call

    def call(self, c):
        from autokernel.harness.stages import expected_output

        self.calls.append(c.key[-1])
        return expected_output(self.ev, c.make, c.size, c.dtype, c.key).to(c.out_dtype), 0.0

    def held(self) -> int:
        return self.base + self.per_call * len(self.calls)


def _run(base: int, per_call: int) -> _Fake:
    spec = resolve("softmax", None)
    fake = _Fake(spec, base, per_call)
    fake.ev = Evaluation(spec, torch.device("cpu"), SEED, call=fake.call, held=fake.held)
    _stage_determinism(fake.ev)
    return fake


def test_nothing_held_costs_no_extra_calls():
    fake = _run(0, 0)
    assert fake.calls == ["a", "a", "b", "a"] * 3


def test_held_bytes_size_the_calls_between():
    fake = _run(1 << 20, 0)  # a megabyte held: more than the cap's worth of 16 KB outputs
    per_dtype = fake.calls[: len(fake.calls) // 3]
    assert per_dtype[:4] == ["a", "a", "b", "a"] and per_dtype[-1] == "a"
    assert len(per_dtype) - 5 == EVICTIONS_MAX
    assert (len(per_dtype) - 1) % 2 == 1, "first and last 'a' an odd number of calls apart"


def test_held_bytes_that_grow_per_input_fail():
    with pytest.raises(StageFailure) as info:
        _run(1 << 20, 40 << 10)  # an input and an output (fp32 2x4096) kept per call
    assert "state kept per input" in info.value.check.message


def test_small_pointer_keyed_growth_passes():
    _run(1 << 20, 512)  # one CUDA block per call: a descriptor cache, not a replay cache


@pytest.mark.gpu
def test_held_bytes_on_cuda_count_blocks_and_pinned_memory():
    """The CUDA parts of retention.held_bytes: allocator blocks (the harness's left out) and
    pinned host tensors, which a device kernel reads directly."""
    from autokernel.harness import retention

    own = torch.empty(1 << 20, device="cuda")
    base = retention.held_bytes([own])
    kept = torch.empty(1000, dtype=torch.uint8, device="cuda")  # one 1024-byte block
    assert retention.held_bytes([own]) - base == 1024
    assert retention.held_bytes([own, kept]) == base
    pinned = torch.empty(1 << 16, dtype=torch.uint8).pin_memory()
    assert retention.held_bytes([own, kept]) - base == pinned.numel()
