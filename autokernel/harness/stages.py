"""The five correctness stages, run by the judge against a kernel that runs in another process.

The judge never imports candidate code. For every check it builds the inputs itself from the
evaluation's seed, computes the reference in float64 from those same low-precision inputs, and
asks the candidate's process (through `Evaluation.call`, see judge.py) to build the same inputs
from the same seed and key, call kernel_fn, and hand back a plain copy of the output; then it
compares. The first failing check ends the run: its text (stage, size, dtype, worst error and
where) is what the agent reads next.

The reference runs where the kernel runs (the GPU when there is one): float64 on the CPU at the
GPU sizes (16384x8192 rows, 8192-cube products) takes minutes per check, on the GPU milliseconds.
"""

from __future__ import annotations

import time
import zlib
from collections.abc import Callable
from dataclasses import dataclass, field

import torch

from autokernel.harness.compare import compare, describe, shape_dtype_error
from autokernel.harness.verdict import STAGES, Check, StageResult, Status
from autokernel.specs import KernelSpec, Size, dtype_name, parse_dtype
from autokernel.specs.base import MakeInputs

# Second (compiled) smoke call, GPU / CPU interpreter. The interpreter runs programs one by one:
# Inductor's softmax over dim 1 of 4x96x40 (one program per output row, 15k elements) took
# 4.2-8.3 s on a 2-core CPU, by load; past 20 s the evaluation's own time limit is at risk.
SMOKE_LIMIT_S = {True: 1.0, False: 20.0}
# The determinism stage's calls on two inputs of one size, "a" and "b". "a" again right away
# catches a racy reduction; "a" after "b" catches a kernel that keeps its last output and
# replays it for unchanged inputs, which would hide the race from back-to-back calls
# (tests/faults/softmax_nondeterministic_replayed.py). Gaps of 0 and 1 between the "a" calls
# also catch variation that follows the parity of a call counter.
DETERMINISM_SCHEDULE = ("a", "a", "b", "a")
# A kernel that keeps every input and output it has seen replays "a" after any number of other
# calls (tests/faults/softmax_nondeterministic_replay_all.py). What it replays it must hold in
# tensors between calls (retention.py), at least an output's bytes per input it can replay, so
# a kernel that holds tensors gets calls on this many distinct inputs "c<k>" and then "a" once
# more: twice the outputs its held bytes would fit, plus one, odd (a call-counter parity
# shows), at most EVICTIONS_MAX (more could not be afforded per evaluation). Twice: a cache full
# of smaller entries from earlier stages must either give up "a" or, taking the new entries in
# place of its old ones, grow by more than half their outputs, which fails on its own (below).
EVICTIONS_MAX = 15
# Tensor bytes a kernel may come to hold per distinct input of the stage, whose calls bring no
# shape or dtype it has not seen (the sweep ran this size in every dtype): half an output, and
# at least this much (a pointer-keyed block or two: 512 bytes each on CUDA). The count is exact
# (allocator blocks and tensor storages): there is no noise to absorb.
HELD_SLACK_PER_INPUT = 4 << 10
MAIN = "inputs"  # the spec's own input generator; any other name is an adversarial case


class StageFailure(Exception):
    """A check that ends the evaluation with a non-PASS status."""

    def __init__(self, status: Status, check: Check) -> None:
        super().__init__(check.message)
        self.status = status
        self.check = check


@dataclass(frozen=True)
class Call:
    """One call of kernel_fn the judge asks for: which inputs (generator name, size, dtype,
    key), which kernel (role, in a comparison), and the output it expects."""

    stage: str
    make: str
    size: Size
    dtype: torch.dtype
    key: tuple
    out_shape: tuple[int, ...]
    out_dtype: torch.dtype
    role: int = 0


# judge side: runs the call in the candidate's process and returns a plain copy of the output
# and the seconds the call took on the judge's clock; StageFailure for the candidate's faults
Caller = Callable[[Call], tuple[torch.Tensor, float]]


def generator(device: torch.device, seed: int, *key: object) -> torch.Generator:
    """A generator seeded from the evaluation seed and the check's identity."""
    mix = zlib.crc32(repr(key).encode()) ^ (seed * 0x9E3779B1)
    return torch.Generator(device=device).manual_seed(mix & 0x7FFF_FFFF_FFFF)


def make_fn(spec: KernelSpec, make: str) -> MakeInputs:
    if make == MAIN:
        return spec.make_inputs
    for case in spec.adversarial:
        if case.name == make:
            return case.make
    raise KeyError(f"{spec.name} has no input generator {make!r}")


def build_inputs(
    spec: KernelSpec, make: str, size: Size, dtype: torch.dtype, device: torch.device,
    seed: int, key: tuple,
) -> tuple:  # fmt: skip
    """The inputs of one call: the judge and the candidate's process each build them from the
    same seed and key, so the judge never has to trust the candidate's copy."""
    return make_fn(spec, make)(
        size, dtype, generator(device, seed, *key, dtype_name(dtype)), device
    )


@dataclass
class Evaluation:
    spec: KernelSpec
    device: torch.device
    seed: int
    extra_sizes: tuple[Size, ...] = ()  # real model shapes from a plan: swept like the rest
    quick: bool = False
    call: Caller | None = None
    # bytes of tensors the kernel's process holds beyond the harness's (retention.held_bytes);
    # None: not measured (a trusted kernel in this very process, see local.py)
    held: Callable[[], int] | None = None
    results: list[StageResult] = field(default_factory=list)

    @property
    def on_gpu(self) -> bool:
        return self.device.type == "cuda"

    def inputs(self, make: str, size: Size, dtype: torch.dtype, *key: object) -> tuple:
        return build_inputs(self.spec, make, size, dtype, self.device, self.seed, key)


def to_float64(args: tuple) -> tuple:
    return tuple(
        a.to(torch.float64) if isinstance(a, torch.Tensor) and a.is_floating_point() else a
        for a in args
    )


def expected_output(ev: Evaluation, make: str, size: Size, dtype: torch.dtype, key: tuple):
    """The float64 reference for the inputs named by (make, size, dtype, key)."""
    return ev.spec.reference(*to_float64(ev.inputs(make, size, dtype, *key)))


def call_checked(
    ev: Evaluation, stage: str, make: str, size: Size, dtype: torch.dtype, key: tuple,
    expected: torch.Tensor, role: int = 0,
) -> tuple[Check, torch.Tensor]:  # fmt: skip
    """Have kernel_fn called once on the named inputs and judge the output against `expected`.
    Raises StageFailure on any problem."""
    assert ev.call is not None, "an Evaluation needs a caller to run checks"
    out_dtype = ev.spec.out_dtype(dtype)
    label = ev.spec.label(size)
    call = Call(stage, make, size, dtype, key, tuple(expected.shape), out_dtype, role)
    got, seconds = ev.call(call)
    check = Check(stage=stage, size=label, dtype=dtype_name(dtype), ok=False, seconds=seconds)
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
    wide = expected.to(torch.float64)  # a generic region's output may be bool: no `-` on it
    err = (got.to(torch.float64) - wide).abs()
    finite = torch.isfinite(err)
    if finite.any():
        check.max_abs_err = float(err[finite].max())
        rel = err[finite] / wide[finite].abs().clamp_min(1e-30)
        check.max_rel_err = float(rel.max())
    check.ok = True
    return check, got


def run_check(
    ev: Evaluation, stage: str, make: str, size: Size, dtype: torch.dtype, key: object = ""
) -> Check:
    full_key = (stage, ev.spec.label(size), key)
    expected = expected_output(ev, make, size, dtype, full_key)
    check, _ = call_checked(ev, stage, make, size, dtype, full_key, expected)
    return check


def _worst(checks: list[Check], spec: KernelSpec) -> Check | None:
    def ratio(c: Check) -> float:
        return c.max_abs_err / spec.tolerance(parse_dtype(c.dtype))[0]

    return max(checks, key=ratio) if checks else None


def _stage_smoke(ev: Evaluation) -> list[Check]:
    size = ev.spec.sizes(ev.on_gpu).smoke
    dtype = torch.float16 if torch.float16 in ev.spec.dtypes else ev.spec.dtypes[0]
    first = run_check(ev, "smoke", MAIN, size, dtype)
    second = run_check(ev, "smoke", MAIN, size, dtype, key="again")
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
        run_check(ev, "sweep", MAIN, size, dtype)
        for size in _sweep_sizes(ev)
        for dtype in ev.spec.dtypes
    ]


def _stage_adversarial(ev: Evaluation) -> list[Check]:
    return [
        run_check(ev, "adversarial", case.name, case.size(ev.on_gpu), dtype, key=case.name)
        for case in ev.spec.adversarial
        for dtype in case.dtypes
    ]


def _stage_determinism(ev: Evaluation) -> list[Check]:
    """Identical inputs, called as DETERMINISM_SCHEDULE says, then after as many calls on other
    inputs as the tensors the kernel holds could cache: outputs must agree bit for bit, and the
    tensors it holds must not grow with the inputs it has seen."""
    sizes = ev.spec.sizes(ev.on_gpu).sweep
    size = max(sizes, key=lambda s: ev.spec.bytes_moved(s, torch.float32))
    label = ev.spec.label(size)
    checks: list[Check] = []
    held = ev.held() if ev.held else 0
    inputs, out_bytes = 0, 0  # distinct inputs of the stage, the largest output's bytes
    for dtype in ev.spec.dtypes:
        keys = {name: ("determinism", label, name) for name in dict.fromkeys(DETERMINISM_SCHEDULE)}
        expected = {name: expected_output(ev, MAIN, size, dtype, k) for name, k in keys.items()}
        n = _evictions(held, expected["a"], ev.spec.out_dtype(dtype))
        cs = tuple(f"c{k}" for k in range(n))
        schedule = (*DETERMINISM_SCHEDULE, *cs, "a") if cs else DETERMINISM_SCHEDULE
        first: dict[str, tuple[int, torch.Tensor]] = {}
        for i, name in enumerate(schedule, start=1):
            key = keys.get(name, ("determinism", label, name))
            want = expected.get(name)
            if want is None:
                want = expected_output(ev, MAIN, size, dtype, key)
            # the same key as the call before: the worker re-uses the same tensors
            check, got = call_checked(ev, "determinism", MAIN, size, dtype, key, want)
            checks.append(check)
            if name not in first:
                first[name] = (i, got.clone())
                continue
            j, ref = first[name]
            if not torch.equal(_bits(got), _bits(ref)):
                diff = (got.to(torch.float64) - ref.to(torch.float64)).abs()
                between = sum(other != name for other in schedule[j : i - 1])
                calls = f"{between} calls" if between > 1 else "a call"
                between_text = f" (with {calls} on other inputs between them)" if between else ""
                raise StageFailure(Status.FAIL, Check(
                    "determinism", label, dtype_name(dtype), False,
                    f"call {i} differs from call {j} on identical inputs{between_text} "
                    f"({int((diff > 0).sum())} elements, max diff {float(diff.max()):.3g}): "
                    "non-deterministic reduction order (atomics?)",
                    max_abs_err=float(diff.max()),
                ))  # fmt: skip
        inputs += len(first)
        out_bytes = max(out_bytes, first["a"][1].numel() * first["a"][1].element_size())
    if ev.held:  # once for the stage: each measure collects garbage and walks every object
        _check_growth(ev.held() - held, inputs, out_bytes, label)
    return checks


def _evictions(held: int, expected: torch.Tensor, out_dtype: torch.dtype) -> int:
    """How many calls on other inputs go between "a" and "a" once more (see EVICTIONS_MAX)."""
    if held <= 0:
        return 0  # nothing kept between calls: nothing to replay from
    one = max(1, expected.numel() * out_dtype.itemsize)
    n = -(-2 * held // one) + 1
    return min(EVICTIONS_MAX, n + 1 - n % 2)


def _check_growth(growth: int, inputs: int, out_bytes: int, label: str) -> None:
    """Fail a kernel whose tensors grew by more than half an output (HELD_SLACK_PER_INPUT at
    least) per new input: it keeps something per input, which is what a replay cache does."""
    if growth > inputs * max(HELD_SLACK_PER_INPUT, out_bytes // 2):
        raise StageFailure(Status.FAIL, Check(
            "determinism", label, "", False,
            f"kernel_fn kept {growth} more bytes of tensors after {inputs} calls on new inputs "
            "of one size: state kept per input (a cache that replays earlier outputs hides "
            "run-to-run variation); keep only state that depends on shapes and dtypes",
        ))  # fmt: skip


def _bits(t: torch.Tensor) -> torch.Tensor:
    """The tensor's bytes, for a bit-for-bit comparison (NaN payloads and -0.0 included)."""
    return t.reshape(-1).contiguous().view(torch.uint8)


def _stage_odd(ev: Evaluation) -> list[Check]:
    return [
        run_check(ev, "odd_sizes", MAIN, size, dtype)
        for size in ev.spec.sizes(ev.on_gpu).odd
        for dtype in ev.spec.dtypes
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
