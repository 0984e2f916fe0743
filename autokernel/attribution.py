"""Attributing profiled time to kernel types, each microsecond exactly once.

Only self times are summed (an op's time minus its children's), so a parent such as aten::linear
and its child aten::addmm are never both counted. Each op is then owned by the outermost thing
that claims it: a `record_function` range named after a kernel type (e.g. "rotary_embedding"), a
module that computes one kernel type as a whole (RMSNorm, LayerNorm, a SwiGLU MLP, a Linear), or
else the outermost aten op it ran under, classified by name. On CUDA the time is the device time
of the kernels each op launched; on the CPU it is the ops' self CPU time, and the Python time
between ops is kept apart as overhead.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass, field

import torch

from autokernel.module_calls import LABEL_PREFIX, ModuleCall, ModuleRecorder

FORWARD_LABEL = "ak::forward"
KERNEL_TYPES = (
    "matmul", "flash_attention", "fused_mlp", "softmax", "layernorm", "rmsnorm",
    "cross_entropy", "rotary_embedding", "reduce",
)  # fmt: skip
MATMUL_OPS = {"aten::linear", "aten::matmul", "aten::mm", "aten::bmm", "aten::addmm",
              "aten::baddbmm", "aten::addbmm"}  # fmt: skip
SDPA_OPS = {
    "aten::scaled_dot_product_attention",
    "aten::_scaled_dot_product_flash_attention",
    "aten::_scaled_dot_product_efficient_attention",
    "aten::_scaled_dot_product_cudnn_attention",
    "aten::_scaled_dot_product_flash_attention_for_cpu",
}
_DTYPES = {"float": "float32", "c10::BFloat16": "bfloat16", "c10::Half": "float16"}


@dataclass
class Instance:
    """One call of one target (or one 'other' op) in one forward pass, with its time."""

    kind: str  # a kernel type, or "other"
    name: str  # the op or module that owns the time: 'aten::gelu', 'SwiGLUMLP'
    shape: dict[str, int] = field(default_factory=dict)
    dtype: str | None = None
    args: dict[str, object] = field(default_factory=dict)
    where: str = ""  # module path pattern of the caller
    us: float = 0.0


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
    return not event.name.startswith((LABEL_PREFIX, FORWARD_LABEL)) and "::" in event.name


def _dtype(event, index: int = 0) -> str | None:
    dtypes = getattr(event, "input_dtypes", None) or []
    name = dtypes[index] if index < len(dtypes) else None
    return _DTYPES.get(name)


def _concrete(event, index: int) -> object:
    values = getattr(event, "concrete_inputs", None) or []
    return values[index] if index < len(values) else None


def _last_dim(dim: object, ndim: int) -> bool:
    if isinstance(dim, (list, tuple)):
        if len(dim) != 1:
            return False
        dim = dim[0]
    return isinstance(dim, int) and dim in (-1, ndim - 1)


def _rows_cols(shape: list[int]) -> dict[str, int]:
    return {"rows": math.prod(shape[:-1]), "cols": shape[-1]}


def _matmul(event) -> tuple[dict[str, int], dict[str, object]] | None:
    """M, N, K from the operands; batched products fold the batch into M (args say so)."""
    shapes = [s for s in event.input_shapes if s]
    name = event.name
    if name in ("aten::addmm", "aten::baddbmm", "aten::addbmm"):
        shapes = shapes[1:]
    if len(shapes) < 2:
        return None
    a, b = shapes[0], shapes[1]
    if name == "aten::linear":  # weight is (N, K)
        if len(b) != 2:
            return None
        return {"M": math.prod(a[:-1]), "N": b[0], "K": b[1]}, {}
    if len(a) < 2 or len(b) < 2:
        return None
    if len(b) == 2:
        return {"M": math.prod(a[:-1]), "N": b[1], "K": b[0]}, {}
    batch = math.prod(a[:-2])
    return {"M": batch * a[-2], "N": b[-1], "K": a[-1]}, {"batch": batch}


def _attention(event) -> tuple[dict[str, int], dict[str, object]] | None:
    shapes = event.input_shapes
    if len(shapes) < 3 or len(shapes[0]) != 4 or len(shapes[1]) != 4:
        return None
    (b, h, s, d), (_, hkv, sk, _) = shapes[0], shapes[1]
    if sk != s:
        return None
    if event.name == "aten::scaled_dot_product_attention":
        if len(shapes) > 3 and shapes[3]:  # an explicit mask: not what a flash kernel computes
            return None
        causal, scale = bool(_concrete(event, 5)), _concrete(event, 6)
    else:
        causal, scale = bool(_concrete(event, 4)), _concrete(event, 6)
    args: dict[str, object] = {"causal": causal}
    if isinstance(scale, float):
        args["sm_scale"] = scale
    return {"batch": b, "heads": h, "kv_heads": hkv, "seq": s, "head_dim": d}, args


def classify_op(event) -> tuple[str, dict[str, int], dict[str, object]]:
    """(kernel type or 'other', shape in the spec's dims, args) of a top-level aten op."""
    name, shapes = event.name, event.input_shapes
    first = shapes[0] if shapes else []
    found = None
    if name in MATMUL_OPS:
        found = _matmul(event)
        kind = "matmul"
    elif name in SDPA_OPS:
        found = _attention(event)
        kind = "flash_attention"
    elif name in ("aten::softmax", "aten::_softmax", "aten::special_softmax") and first:
        kind = "softmax"
        found = (_rows_cols(first), {}) if _last_dim(_concrete(event, 1), len(first)) else None
    elif name in ("aten::layer_norm", "aten::native_layer_norm") and first:
        kind = "layernorm"
        normalized = _concrete(event, 1)
        if isinstance(normalized, (list, tuple)) and len(normalized) == 1:
            eps = _concrete(event, 4)
            found = (_rows_cols(first), {"eps": eps} if isinstance(eps, float) else {})
    elif name in ("aten::rms_norm", "aten::_fused_rms_norm") and first:
        kind = "rmsnorm"
        eps = _concrete(event, 3)
        found = (_rows_cols(first), {"eps": eps} if isinstance(eps, float) else {})
    elif name == "aten::cross_entropy_loss" and len(first) == 2:
        kind = "cross_entropy"
        found = ({"rows": first[0], "vocab": first[1]}, {})
    elif name == "aten::sum" and first:
        kind = "reduce"
        found = (_rows_cols(first), {}) if _last_dim(_concrete(event, 1), len(first)) else None
    if found is None:
        return "other", {}, {}
    return kind, found[0], found[1]


def _range_shape(kind: str, ops: Iterable) -> tuple[dict[str, int], str | None]:
    """Shape of a user's `record_function(<kernel type>)` range, read off the ops inside it."""
    for op in ops:
        for i, s in enumerate(op.input_shapes):
            if kind == "rotary_embedding" and len(s) == 4:
                return dict(zip(("batch", "heads", "seq", "head_dim"), s, strict=True)), _dtype(
                    op, i
                )
            if kind in ("softmax", "layernorm", "rmsnorm", "reduce") and s:
                return _rows_cols(s), _dtype(op, i)
    return {}, None


def _owner(chain: list, recorder: ModuleRecorder, confirmed: dict[int, bool]):
    """The outermost claiming event of an op's ancestor chain and its ModuleCall if a module."""
    for ev in chain:
        if ev.name in KERNEL_TYPES:
            return ev, None
        call = recorder.call_of(ev.name)
        if call is not None and call.kind is not None and confirmed.get(ev.id, True):
            return ev, call
    return None, None


def _where(chain: list, recorder: ModuleRecorder) -> str:
    calls = [c for c in (recorder.call_of(e.name) for e in chain) if c is not None]
    return calls[-1].pattern if calls else ""


def _confirmations(events: list, recorder: ModuleRecorder) -> dict[int, bool]:
    """Module ranges whose kind needs a given op inside (silu for SwiGLU, rsqrt for an unnamed
    RMSNorm): False where that op never ran, so their ops are classified one by one."""
    needed = {}
    for ev in events:
        call = recorder.call_of(ev.name)
        if call is not None and call.needs:
            needed[ev.id] = call.needs
    found = dict.fromkeys(needed, False)
    if needed:
        for ev in events:
            if ev.name in needed.values():
                for anc in _ancestors(ev.cpu_parent):
                    if needed.get(anc.id) == ev.name:
                        found[anc.id] = True
    return found


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


def attribute(events: list, recorder: ModuleRecorder, device: bool, iterations: int) -> Attribution:
    """Group the self time of every op inside the forward ranges into instances."""
    cpu = [e for e in events if e.device_type == torch.autograd.DeviceType.CPU]
    confirmed = _confirmations(cpu, recorder)
    device_us = _device_times(cpu, _annotations(events)) if device else {}
    by_owner: dict[int, Instance] = {}
    owner_ops: dict[int, list] = {}
    overhead = 0.0
    for ev in cpu:
        chain = _ancestors(ev)
        if chain[0].name != FORWARD_LABEL:
            continue
        t = device_us[id(ev)] if device else float(ev.self_cpu_time_total)
        if not _is_op(ev) and not device:
            overhead += t  # Python between ops, hooks, the loop: no kernel to speed up
            continue
        owner, call = _owner(chain, recorder, confirmed)
        if owner is None:
            ops = [e for e in chain if _is_op(e)]
            owner = ops[0] if ops else chain[-1]
        inst = by_owner.get(owner.id)
        if inst is None:
            inst = _instance(owner, call, chain, recorder)
            by_owner[owner.id] = inst
            owner_ops[owner.id] = []
        if _is_op(ev):
            owner_ops[owner.id].append(ev)
        inst.us += t
    for oid, inst in by_owner.items():
        if inst.kind in KERNEL_TYPES and not inst.shape and owner_ops[oid]:
            inst.shape, inst.dtype = _range_shape(inst.kind, owner_ops[oid])
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


def _instance(owner, call: ModuleCall | None, chain: list, recorder: ModuleRecorder) -> Instance:
    where = _where(chain[: chain.index(owner) + 1], recorder)
    if call is not None:
        dtype = str(call.dtype).removeprefix("torch.") if call.dtype is not None else None
        return Instance(call.kind or "other", call.cls, dict(call.shape), dtype, call.args, where)
    if owner.name in KERNEL_TYPES:
        return Instance(owner.name, owner.name, where=where)
    if not _is_op(owner):  # device time launched from Python code, not through an aten op
        module = recorder.call_of(owner.name)
        label = module.cls if module is not None else owner.name
        return Instance("other", f"{label} (outside aten ops)", where=where)
    kind, shape, args = classify_op(owner)
    return Instance(kind, owner.name, shape, _dtype(owner), args, where)
