"""Attributing profiled time to kernel targets, each microsecond exactly once.

Only self times are summed (an op's time minus its children's), so a parent such as aten::linear
and its child aten::addmm are never both counted. Each op is owned by the outermost recorded
call that claims it (module_calls.py): a module, torch call or model function the matcher made a
kernel type (an RMSNorm, a SwiGLU MLP, x.softmax(-1), a rotary function), or a call or region
that claims its ops as a generic target (autokernel.model.claims). What no claim covers is
listed by its outermost aten op. With by_name (the compiled model's profile, which has no
recorded calls) ops are typed by their names instead (autokernel.model.aten_names). On CUDA the
time is the device time of the kernels each op launched; on the CPU it is the ops' self CPU
time, and the Python time between ops is kept apart as overhead.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import torch

from autokernel.model.aten_names import classify_op
from autokernel.model.claims import VIEWS, generic_claims
from autokernel.model.profiling.module_calls import PREFIXES, ModuleCall, ModuleRecorder
from autokernel.specs import GENERIC, SPECS

FORWARD_LABEL = "ak::forward"
KERNEL_TYPES: tuple[str, ...] = tuple(SPECS)  # the nine types, from their one registry
TARGET_KINDS = (*KERNEL_TYPES, GENERIC)
_DTYPES = {"float": "float32", "c10::BFloat16": "bfloat16", "c10::Half": "float16",
           "double": "float64"}  # fmt: skip


@dataclass
class Instance:
    """One call of one target (or one 'other' op) in one forward pass, with its time."""

    kind: str  # a kernel type, "generic", or "other"
    name: str  # the op, module, call or function that owns the time: 'aten::gelu', 'SwiGLUMLP'
    shape: dict[str, int] = field(default_factory=dict)
    dtype: str | None = None
    args: dict[str, object] = field(default_factory=dict)
    where: str = ""  # module path pattern of the caller
    us: float = 0.0
    route: str = ""  # a generic target's route key (how verify finds the same call)
    op: str = ""  # the first computing aten op inside: a generic row's name if it stays other
    why: str = ""  # an 'other' op's: why the call it ran in is not its kernel type's target


@dataclass
class Attribution:
    instances: list[Instance]
    overhead_us: float  # CPU: Python time between ops; CUDA: 0
    forward_us: float  # CPU: wall time inside the forward ranges; CUDA: total kernel time
    profiler_total_us: float  # the same total summed another way, as the no-double-count check
    iterations: int


def _ancestors(event) -> list:
    chain = []
    while event is not None:
        chain.append(event)
        event = event.cpu_parent
    return chain[::-1]


def _is_op(event) -> bool:
    return not event.name.startswith((*PREFIXES, FORWARD_LABEL)) and "::" in event.name


def _dtype(event, index: int = 0) -> str | None:
    dtypes = getattr(event, "input_dtypes", None) or []
    name = dtypes[index] if index < len(dtypes) else None
    return _DTYPES.get(name)


def _owner(chain: list, recorder: ModuleRecorder, claims: set[int]):
    """The outermost claiming event of an op's ancestor chain and its record."""
    for ev in chain:
        call = recorder.call_of(ev.name)
        if call is not None and (call.kind is not None or ev.id in claims):
            return ev, call
    return None, None


def _where(chain: list, recorder: ModuleRecorder) -> str:
    calls = [c for c in (recorder.call_of(e.name) for e in chain) if c is not None]
    return calls[-1].pattern if calls else ""


def _annotations(events: list) -> set[str]:
    """Names of the device-side spans of record_function ranges (gpu_user_annotation): our own
    range labels, never a kernel's name."""
    return {
        e.name
        for e in events
        if e.device_type != torch.autograd.DeviceType.CPU and e.is_user_annotation
    }


def _span(event) -> tuple[float, float]:
    """Sort key putting an enclosing event before the events inside it (stable otherwise)."""
    r = getattr(event, "time_range", None)
    return (r.start, -r.end) if r is not None else (0.0, 0.0)


def _device_times(cpu: list, spans: set[str]) -> dict[int, float]:
    """Device µs of each CPU event (by id()), every kernel counted once.

    torch's parser appends a kernel to every CPU event that carries the correlation id the
    kernel is linked to. Besides the op that launched it, CUPTI's overhead records (an activity
    buffer request, lazy function loading) carry that id: they have none of their own and take
    the enclosing op's (pytorch/pytorch#193924). One such record in a one-kernel forward counted
    a whole forward twice: 5 profiled forwards read as 6, the 118-120 % of single-op files. So a
    correlation id's kernels count once, for the first (outermost) event that holds them. torch
    also appends a range's own device-side span where kineto links the two: those spans cover
    kernels counted under their ops and are left out by name."""
    times: dict[int, float] = {}
    seen: set[int] = set()
    for e in sorted(cpu, key=_span):
        kernels = getattr(e, "kernels", None)
        if kernels is None or getattr(e, "is_legacy", False):
            times[id(e)] = float(e.self_device_time_total)
            continue
        us = sum(k.duration for k in kernels if k.name not in spans)
        if us and e.id in seen:
            us = 0.0
        elif us:
            seen.add(e.id)
        times[id(e)] = float(us)
    return times


def attribute(
    events: list, recorder: ModuleRecorder, device: bool, iterations: int, by_name: bool = False
) -> Attribution:
    """Group the self time of every op inside the forward ranges into instances."""
    cpu = [e for e in events if e.device_type == torch.autograd.DeviceType.CPU]
    claims = generic_claims(cpu, recorder)
    device_us = _device_times(cpu, _annotations(events)) if device else {}
    by_owner: dict[int, Instance] = {}
    overhead = 0.0
    for ev in cpu:
        chain = _ancestors(ev)
        if chain[0].name != FORWARD_LABEL:
            continue
        t = device_us[id(ev)] if device else float(ev.self_cpu_time_total)
        if not _is_op(ev) and not device:
            overhead += t  # Python between ops, hooks, the loop: no kernel to speed up
            continue
        owner, call = _owner(chain, recorder, claims)
        if owner is None:
            ops = [e for e in chain if _is_op(e)]
            owner = ops[0] if ops else chain[-1]
        inst = by_owner.get(owner.id)
        if inst is None:
            inst = _instance(owner, call, chain, recorder, by_name)
            by_owner[owner.id] = inst
        if _is_op(ev) and not inst.op and ev.name not in VIEWS:
            inst.op = ev.name
        inst.us += t
    forward = [e for e in cpu if e.name == FORWARD_LABEL]
    if device:
        kernels = [e for e in events if e.device_type != torch.autograd.DeviceType.CPU]
        total = sum(float(e.self_device_time_total) for e in kernels if not e.is_user_annotation)
        profiler_total = sum(device_us.values())
    else:
        total = sum(float(e.cpu_time_total) for e in forward)
        profiler_total = sum(float(e.self_cpu_time_total) for e in cpu)
    return Attribution(
        instances=list(by_owner.values()),
        overhead_us=overhead,
        forward_us=total,
        profiler_total_us=profiler_total,
        iterations=iterations,
    )


def _instance(
    owner, call: ModuleCall | None, chain: list, recorder: ModuleRecorder, by_name: bool
) -> Instance:
    where = _where(chain[: chain.index(owner) + 1], recorder)
    if call is not None:
        dtype = str(call.dtype).removeprefix("torch.") if call.dtype is not None else None
        if call.kind is None:  # a generic claim
            args = {"inputs": call.inputs}
            return Instance(GENERIC, call.cls, {}, dtype, args, where, route=call.key)
        return Instance(call.kind, call.cls, dict(call.shape), dtype, call.args, where)
    if not _is_op(owner):  # device time launched from Python code, not through an aten op
        module = recorder.call_of(owner.name)
        label = module.cls if module is not None else owner.name
        return Instance("other", f"{label} (outside aten ops)", where=where)
    if not by_name:
        calls = [c for c in (recorder.call_of(e.name) for e in chain) if c is not None]
        why = next((f"{c.cls} ({c.inputs}): {c.note}" for c in calls if c.note), "")
        return Instance("other", owner.name, {}, _dtype(owner), {}, where, why=why)
    kind, shape, args = classify_op(owner)
    return Instance(kind, owner.name, shape, _dtype(owner), args, where)
