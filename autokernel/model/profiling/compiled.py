"""What torch.compile makes of the profiled model: its forward time, and per target where known.

A user who ships `torch.compile` gains from a kernel only what it beats Inductor by, so the plan
records the compiled model beside the eager one. The compiled forward runs under torch.profiler
like the eager one; Inductor names its Triton kernels after the ops it fused
(`triton_per_fused__softmax_0`) and calls cuBLAS through aten::mm, so a target's compiled time is
read off those names and shapes where one target of its type can own them. Where that fails (a
fused MLP whose GEMMs and SiLU land in separate kernels, a rotary or reduction fused into its
neighbours, the CPU, whose C++ kernels carry no names in the profile), the target's eager time is
scaled by the whole forward's compiled/eager ratio, and the plan says which figure is which.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

import torch
from torch import nn
from torch.profiler import ProfilerActivity, profile, record_function

from autokernel.model.kinds import KINDS
from autokernel.model.loading import LoadedModel
from autokernel.model.profiling.attribution import FORWARD_LABEL, KERNEL_TYPES, Instance, attribute
from autokernel.model.profiling.module_calls import ModuleRecorder

BY_NAMES = "kernel names"  # a target's compiled time read off Inductor's kernels
BY_RATIO = "whole-forward ratio"  # eager time x compiled/eager of the whole forward
# Substrings of Inductor's kernel names (fused op names) that identify a kernel type, by the
# types' ranks (ModelSide.inductor_rank): first match wins.
NAME_KINDS: tuple[tuple[str, tuple[str, ...]], ...] = tuple(
    (kind, side.inductor_names)
    for kind, side in sorted(KINDS.items(), key=lambda item: item[1].inductor_rank)
    if side.inductor_names
)
# Types whose compiled code is not one kernel that names them: the ratio is the honest figure.
RATIO_ONLY = tuple(kind for kind, side in KINDS.items() if side.compiled == "ratio")
BY_SHAPE = tuple(kind for kind, side in KINDS.items() if side.compiled == "shape")


@dataclass
class CompiledFigures:
    """Per forward: timed (wall, synchronized) and profiled (the eager profile's unit)."""

    eager_forward_ms: float
    compile_forward_ms: float
    eager_total_ms: float  # the eager profile's total (CUDA kernel time, or CPU time)
    compile_total_ms: float  # the same total for the compiled forward
    by_kind: dict[str, list[tuple[dict[str, int], float]]] = field(default_factory=dict)
    kernel_time: bool = True  # the totals are CUDA kernel time, else CPU time under the profiler

    @property
    def ratio(self) -> float:
        """Compiled over eager. On CUDA from the kernel-time totals, the unit of every target's
        ms; on the CPU from the timed forwards, since the profiler's own cost inside a compiled
        CPU forward skewed the profiled ratio (2.5x slower profiled, 3.9x faster timed)."""
        if self.kernel_time:
            num, den = self.compile_total_ms, self.eager_total_ms
        else:
            num, den = self.compile_forward_ms, self.eager_forward_ms
        return num / den if den > 0 else 1.0


def kind_of_kernel(name: str) -> str | None:
    """The kernel type an Inductor kernel's name says it computes, or None."""
    low = name.lower()
    for kind, needles in NAME_KINDS:
        if any(n in low for n in needles):
            return kind
    return None


def group_compiled(
    instances: list[Instance], iterations: int, kernels: list[tuple[str, float]] | None = None
) -> dict[str, list]:
    """ms per forward by kernel type: matmuls from the aten ops that launched them (by shape);
    other types by Inductor's names, read off the device kernels (`kernels`: name, µs) where
    the profile has them, since the CPU event a Triton launch hangs off need not carry the
    name, else off the owners of the attributed time."""
    out: dict[str, list[tuple[dict[str, int], float]]] = {}
    per = 1e-3 / iterations
    for inst in instances:
        kind = inst.kind if inst.kind in KERNEL_TYPES else kind_of_kernel(inst.name)
        if kind in BY_SHAPE or (kernels is None and kind is not None):
            if inst.us > 0:
                out.setdefault(kind, []).append((inst.shape, inst.us * per))
    for name, us in kernels or ():
        kind = kind_of_kernel(name)
        if kind is not None and us > 0:
            out.setdefault(kind, []).append(({}, us * per))
    return out


def target_compile_ms(
    targets: list[tuple[str, dict[str, int], float]], figures: CompiledFigures
) -> list[tuple[float, str]]:
    """(compiled ms per forward, how it was found) for each (kind, shape, eager ms) target.

    A matmul owns the compiled GEMMs of its own shape; another named type owns its type's
    kernels when it is the only target of that type. Everything else takes the ratio."""
    count: dict[str, int] = {}
    for kind, _, _ in targets:
        count[kind] = count.get(kind, 0) + 1
    out = []
    for kind, shape, eager_ms in targets:
        found = figures.by_kind.get(kind, [])
        if kind in BY_SHAPE:
            ms = sum(m for s, m in found if s == shape)
        elif kind in RATIO_ONLY or count[kind] > 1:
            ms = 0.0
        else:
            ms = sum(m for _, m in found)
        out.append((ms, BY_NAMES) if ms > 0 else (eager_ms * figures.ratio, BY_RATIO))
    return out


def device_kernels(events: list) -> list[tuple[str, float]]:
    """(name, µs) of every device kernel in a profile's events; user annotations (our own
    record_function ranges, mirrored on the device timeline) are not kernels."""
    return [
        (e.name, float(e.self_device_time_total))
        for e in events
        if e.device_type != torch.autograd.DeviceType.CPU and not e.is_user_annotation
    ]


def _sync(cuda: bool) -> None:
    if cuda:
        torch.cuda.synchronize()


def _timed(fn, inputs: list, iters: int, cuda: bool) -> float:
    """Mean ms per forward over `iters` synchronized forwards."""
    _sync(cuda)
    start = time.perf_counter()
    with torch.no_grad():
        for _ in range(iters):
            fn(*inputs)
    _sync(cuda)
    return (time.perf_counter() - start) * 1e3 / iters


def measure_compiled(
    loaded: LoadedModel, eager_total_ms: float, iters: int, warmup: int
) -> CompiledFigures:
    """Compile the model, time it against eager, and profile it; raises what compile raises."""
    cuda = loaded.device.type == "cuda"
    compiled = torch.compile(loaded.model)
    with torch.no_grad():
        for _ in range(max(warmup, 2)):  # the first call compiles; the second settles guards
            compiled(*loaded.inputs)
            loaded.model(*loaded.inputs)
    eager_ms = _timed(loaded.model, loaded.inputs, iters, cuda)
    compile_ms = _timed(compiled, loaded.inputs, iters, cuda)
    activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if cuda else [])
    with torch.no_grad(), profile(activities=activities, record_shapes=True) as prof:
        for _ in range(iters):
            with record_function(FORWARD_LABEL):
                compiled(*loaded.inputs)
        _sync(cuda)
    # No module hooks on a compiled model (dynamo would trace them): ops are owned by themselves.
    events = list(prof.events())
    result = attribute(events, ModuleRecorder(nn.Module()), cuda, iters, by_name=True)
    kernels = device_kernels(events)
    return CompiledFigures(
        eager_forward_ms=eager_ms,
        compile_forward_ms=compile_ms,
        eager_total_ms=eager_total_ms,
        compile_total_ms=result.forward_us * 1e-3 / iters,
        by_kind=group_compiled(result.instances, iters, kernels if cuda else None),
        kernel_time=cuda,
    )
