"""The five correctness stages, run inside the worker process against a loaded kernel_fn.

Every check builds fresh inputs from the evaluation's seed, computes the reference in float64
from those same low-precision inputs, poisons the memory the output is likely to land in, calls
the candidate under the runtime guard, and compares. The first failing check ends the run: its
text (stage, size, dtype, worst error and where) is what the agent reads next.
"""

from __future__ import annotations

import time
import traceback
import zlib
from collections.abc import Callable
from dataclasses import dataclass, field

import torch

from autokernel.harness.compare import compare, describe, shape_dtype_error
from autokernel.harness.guards import TorchOpMonitor
from autokernel.harness.verdict import STAGES, Check, StageResult, Status
from autokernel.specs import DTYPES, KernelSpec, Size, dtype_name, parse_dtype
from autokernel.specs.base import MakeInputs

SMOKE_LIMIT_S = {True: 1.0, False: 3.0}  # GPU / CPU interpreter, second (compiled) call
DETERMINISM_RUNS = 3


class StageFailure(Exception):
    """A check that ends the evaluation with a non-PASS status."""

    def __init__(self, status: Status, check: Check) -> None:
        super().__init__(check.message)
        self.status = status
        self.check = check


@dataclass
class Evaluation:
    spec: KernelSpec
    kernel_fn: Callable
    device: torch.device
    seed: int
    extra_sizes: tuple[Size, ...] = ()  # real model shapes from a plan: swept like the rest
    quick: bool = False
    guard_runtime: bool = True
    results: list[StageResult] = field(default_factory=list)

    @property
    def on_gpu(self) -> bool:
        return self.device.type == "cuda"

    def generator(self, *key: object) -> torch.Generator:
        """A generator seeded from the evaluation seed and the check's identity."""
        mix = zlib.crc32(repr(key).encode()) ^ (self.seed * 0x9E3779B1)
        return torch.Generator(device=self.device).manual_seed(mix & 0x7FFF_FFFF_FFFF)

    def inputs(self, make: MakeInputs, size: Size, dtype: torch.dtype, *key: object) -> tuple:
        return make(size, dtype, self.generator(*key, dtype_name(dtype)), self.device)


def to_float64(args: tuple) -> tuple:
    return tuple(
        a.to(torch.float64) if isinstance(a, torch.Tensor) and a.is_floating_point() else a
        for a in args
    )


def _poison(shape: torch.Size, dtype: torch.dtype, device: torch.device) -> None:
    """Fill, then free, a block the size of the expected output: the allocator hands that same
    block to the kernel's torch.empty, so elements it never writes read back as NaN."""
    if dtype.is_floating_point:
        block = torch.full(shape, float("nan"), dtype=dtype, device=device)
        del block


def _sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize()


def call_checked(
    ev: Evaluation, stage: str, label: str, dtype: torch.dtype, args: tuple, expected: torch.Tensor
) -> tuple[Check, torch.Tensor]:
    """Call kernel_fn once on args and judge the output. Raises StageFailure on any problem."""
    out_dtype = ev.spec.out_dtype(dtype)
    snapshot = [a.clone() if isinstance(a, torch.Tensor) else a for a in args]
    check = Check(stage=stage, size=label, dtype=dtype_name(dtype), ok=False)
    _poison(expected.shape, out_dtype, ev.device)
    monitor = TorchOpMonitor()
    t0 = time.perf_counter()
    try:
        if ev.guard_runtime:
            with monitor:
                got = ev.kernel_fn(*args)
        else:
            got = ev.kernel_fn(*args)
        _sync(ev.device)
    except Exception as exc:  # the candidate's own error: report it, don't die of it
        tb = traceback.format_exception(exc)[-6:]
        check.message = f"kernel_fn raised {type(exc).__name__}: {exc}\n{''.join(tb)}"[-3000:]
        raise StageFailure(Status.CRASH, check) from None
    check.seconds = time.perf_counter() - t0
    if monitor.forbidden:
        check.message = (
            "kernel_fn called torch ops that compute: "
            + ", ".join(monitor.forbidden[:8])
            + ". Only allocation, views and copies may run outside the kernel."
        )
        raise StageFailure(Status.REJECTED, check)
    for before, after in zip(snapshot, args, strict=True):
        if isinstance(before, torch.Tensor) and not torch.equal(before, after):
            check.message = "kernel_fn modified one of its inputs; inputs must stay unchanged"
            raise StageFailure(Status.REJECTED, check)
    problem = shape_dtype_error(got, expected, out_dtype)
    if problem:
        check.message = problem
        raise StageFailure(Status.FAIL, check)
    atol, rtol = ev.spec.tolerance(dtype)
    mismatch = compare(got, expected, atol, rtol)
    if mismatch is not None:
        check.max_abs_err, check.max_rel_err = mismatch.max_abs_err, mismatch.max_rel_err
        check.message = describe(mismatch, atol, rtol)
        raise StageFailure(Status.FAIL, check)
    err = (got.to(torch.float64) - expected).abs()
    finite = torch.isfinite(err)
    if finite.any():
        check.max_abs_err = float(err[finite].max())
        rel = err[finite] / expected[finite].abs().clamp_min(1e-30)
        check.max_rel_err = float(rel.max())
    check.ok = True
    return check, got


def run_check(
    ev: Evaluation, stage: str, make: MakeInputs, size: Size, dtype: torch.dtype, key: object = ""
) -> Check:
    label = ev.spec.label(size)
    args = ev.inputs(make, size, dtype, stage, label, key)
    expected = ev.spec.reference(*to_float64(args))
    check, _ = call_checked(ev, stage, label, dtype, args, expected)
    return check


def _worst(checks: list[Check], spec: KernelSpec) -> Check | None:
    def ratio(c: Check) -> float:
        return c.max_abs_err / spec.tolerance(parse_dtype(c.dtype))[0]

    return max(checks, key=ratio) if checks else None


def _stage_smoke(ev: Evaluation) -> list[Check]:
    size = ev.spec.sizes(ev.on_gpu).smoke
    dtype = torch.float16
    first = run_check(ev, "smoke", ev.spec.make_inputs, size, dtype)
    second = run_check(ev, "smoke", ev.spec.make_inputs, size, dtype, key="again")
    limit = SMOKE_LIMIT_S[ev.on_gpu]
    if second.seconds > limit:
        second.ok = False
        second.message = (
            f"smoke call took {second.seconds:.2f} s once compiled (limit {limit:g} s): "
            "a kernel this slow on a small input is broken or serialized"
        )
        raise StageFailure(Status.FAIL, second)
    return [first, second]


def _sweep_sizes(ev: Evaluation) -> tuple[Size, ...]:
    sizes = ev.spec.sizes(ev.on_gpu).sweep
    if ev.quick:
        sizes = sizes[:: max(1, len(sizes) // 3)][:3]
    return (*sizes, *ev.extra_sizes)


def _stage_sweep(ev: Evaluation) -> list[Check]:
    return [
        run_check(ev, "sweep", ev.spec.make_inputs, size, dtype)
        for size in _sweep_sizes(ev)
        for dtype in DTYPES
    ]


def _stage_adversarial(ev: Evaluation) -> list[Check]:
    return [
        run_check(ev, "adversarial", case.make, case.size(ev.on_gpu), dtype, key=case.name)
        for case in ev.spec.adversarial
        for dtype in case.dtypes
    ]


def _stage_determinism(ev: Evaluation) -> list[Check]:
    """The same inputs three times: outputs must agree bit for bit (no racy atomics)."""
    sizes = ev.spec.sizes(ev.on_gpu).sweep
    size = max(sizes, key=lambda s: ev.spec.bytes_moved(s, torch.float32))
    label = ev.spec.label(size)
    checks = []
    for dtype in DTYPES:
        args = ev.inputs(ev.spec.make_inputs, size, dtype, "determinism", label)
        expected = ev.spec.reference(*to_float64(args))
        outs = []
        for _ in range(DETERMINISM_RUNS):
            check, got = call_checked(ev, "determinism", label, dtype, args, expected)
            outs.append(got.clone())
            checks.append(check)
        for i, out in enumerate(outs[1:], start=2):
            same = out.view(torch.uint8) if out.dim() else out.reshape(1).view(torch.uint8)
            ref = outs[0].view(torch.uint8) if out.dim() else outs[0].reshape(1).view(torch.uint8)
            if not torch.equal(same, ref):
                diff = (out.to(torch.float64) - outs[0].to(torch.float64)).abs()
                check = Check(
                    "determinism", label, dtype_name(dtype), False,
                    f"call {i} differs from call 1 on identical inputs "
                    f"({int((diff > 0).sum())} elements, max diff {float(diff.max()):.3g}): "
                    "non-deterministic reduction order (atomics?)",
                    max_abs_err=float(diff.max()),
                )  # fmt: skip
                raise StageFailure(Status.FAIL, check)
    return checks


def _stage_odd(ev: Evaluation) -> list[Check]:
    return [
        run_check(ev, "odd_sizes", ev.spec.make_inputs, size, dtype)
        for size in ev.spec.sizes(ev.on_gpu).odd
        for dtype in DTYPES
    ]


_RUNNERS = {
    "smoke": _stage_smoke,
    "sweep": _stage_sweep,
    "adversarial": _stage_adversarial,
    "determinism": _stage_determinism,
    "odd_sizes": _stage_odd,
}


def run_stages(ev: Evaluation, progress: Callable[[str], None] = lambda s: None) -> None:
    """Run the five stages in order; the first failure raises StageFailure after recording it."""
    for name in STAGES:
        progress(name)
        t0 = time.perf_counter()
        try:
            checks = _RUNNERS[name](ev)
        except StageFailure:
            ev.results.append(StageResult(name, "FAIL", seconds=time.perf_counter() - t0))
            for rest in STAGES[STAGES.index(name) + 1 :]:
                ev.results.append(StageResult(rest, "SKIPPED"))
            raise
        ev.results.append(
            StageResult(
                name, "PASS", len(checks), _worst(checks, ev.spec), time.perf_counter() - t0
            )
        )
