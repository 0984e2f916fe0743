"""Which recorded calls claim their ops as one generic target (a region outside the nine types).

Decided from the profile itself: the aten ops each recorded range ran. A torch call with a
tensor argument is a generic target when it computed something (not just a view) and nothing
inside it is a product, a convolution, an attention, an embedding lookup or random. A module
forward or model function is one generic region when everything inside it fuses (the same
test) and it made two or more computing calls: GPT-2's tanh GELU written out as eight ops, an
RMSNorm written as x / sqrt(mean(x ** 2) + eps), transformers' rotary function. One computing
call alone is left to that call (its own generic or kernel-type target), so a single-op model
is the op, not the model. The outermost claim still wins (attribution.py).
"""

from __future__ import annotations

import re

from autokernel.model.profiling.module_calls import (
    CALL_PREFIX,
    PREFIXES,
    ModuleCall,
    ModuleRecorder,
)

# aten ops a fused elementwise/reduction kernel does not compute: products, convolutions,
# attention, lookups, randomness, host reads and data-dependent shapes.
UNFUSIBLE = re.compile(
    r"aten::(mm|bmm|addmm|addbmm|baddbmm|matmul|linear|mv|dot|einsum|_?convolution.*|conv.*|"
    r"_?scaled_dot_product.*|_flash.*|_efficient.*|_cudnn.*|embedding.*|.*dropout.*|"
    r"bernoulli.*|rand.*|normal.*|uniform_|multinomial|nonzero|_local_scalar_dense|item|"
    r"masked_select|unique.*|_unique.*|index_put.*|_index_put.*|topk|sort|argsort)$"
)
# aten ops that compute nothing: views, metadata and allocation.
VIEWS = frozenset(
    {"aten::view", "aten::_unsafe_view", "aten::reshape", "aten::_reshape_alias",
     "aten::transpose", "aten::t", "aten::permute", "aten::expand", "aten::expand_as",
     "aten::unsqueeze", "aten::squeeze", "aten::slice", "aten::select", "aten::as_strided",
     "aten::alias", "aten::detach", "aten::split", "aten::split_with_sizes", "aten::chunk",
     "aten::unbind", "aten::narrow", "aten::view_as", "aten::lift_fresh", "aten::flatten",
     "aten::unflatten", "aten::movedim", "aten::resolve_conj", "aten::resolve_neg",
     "aten::empty", "aten::empty_like", "aten::empty_strided", "aten::new_empty",
     "aten::new_empty_strided", "aten::sym_size", "aten::sym_stride", "aten::numpy_T",
     "aten::contiguous", "aten::to", "aten::type_as", "aten::result_type", "aten::lift"}
)  # fmt: skip


def _ancestors(event) -> list:
    chain = []
    while event is not None:
        chain.append(event)
        event = event.cpu_parent
    return chain


def generic_claims(cpu: list, recorder: ModuleRecorder) -> set[int]:
    """Ids of the range events that claim their ops as a generic target."""
    ops: dict[int, set[str]] = {}  # range event id -> aten op names inside
    calls: dict[int, list[int]] = {}  # module/function range id -> call range ids inside
    records: dict[int, ModuleCall] = {}
    for ev in cpu:
        record = recorder.call_of(ev.name)
        if record is not None:
            records[ev.id] = record
            ops.setdefault(ev.id, set())
    for ev in cpu:
        is_op = "::" in ev.name and not ev.name.startswith(PREFIXES)
        above = [a for a in _ancestors(ev.cpu_parent) if a.id in records]
        if is_op:
            for a in above:
                ops[a.id].add(ev.name)
        elif ev.id in records and ev.name.startswith(CALL_PREFIX):
            for a in above:
                calls.setdefault(a.id, []).append(ev.id)
    claims = set()
    for rid, record in records.items():
        if record.kind is not None or not _fusible(ops[rid]):
            continue
        if record.route == "call":
            if ops[rid] - VIEWS:
                claims.add(rid)
            continue
        computing = [c for c in calls.get(rid, []) if ops.get(c, set()) - VIEWS]
        if len(computing) >= 2:
            claims.add(rid)
    return claims


def _fusible(names: set[str]) -> bool:
    return not any(UNFUSIBLE.match(n) for n in names)
