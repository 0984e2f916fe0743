"""The model side of every kernel type, read off the spec registry: what attribution, the
custom ops, the matcher and patching know about a type is its spec's ModelSide
(autokernel/specs/model_side.py), so nothing in the model package names a type. Generic
targets, whose spec comes from their region, are the one kind handled here by name.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from autokernel.specs import GENERIC, SPECS
from autokernel.specs.model_side import CallMatch, CallNote, ModelSide

Size = dict[str, int]

KINDS: dict[str, ModelSide] = {n: s.model for n, s in SPECS.items() if s.model is not None}
assert set(KINDS) == set(SPECS), "every kernel type's spec has its model side"

# A torch call's kernel type and its matcher, by the callee's name (calls.api_name).
CALLS: dict[str, tuple[str, CallMatch]] = {}
for _kind, _side in KINDS.items():
    for _name, _match in _side.calls.items():
        assert _name not in CALLS, f"{_name} claimed by {CALLS[_name][0]} and {_kind}"
        CALLS[_name] = (_kind, _match)

# Why a call by one of those names is left to PyTorch, where the type says (batched products).
CALL_NOTES: dict[str, tuple[str, CallNote]] = {
    name: (kind, note) for kind, side in KINDS.items() for name, note in side.notes.items()
}
assert all(CALLS.get(n, ("",))[0] == k for n, (k, _) in CALL_NOTES.items()), "notes name calls"

# A generic target's op takes the region's tensors as one list; its output shape comes from
# the region's description (autokernel.model.generic_ops).
GENERIC_SCHEMA = "(Tensor[] xs, int slot) -> Tensor"


def call_size(kind: str, args: Sequence) -> Size:
    """The call's size in the spec's dims, as plan.yaml records real shapes."""
    return KINDS[kind].size(args)


def same_size(kind: str, call: Mapping[str, int], planned: Mapping[str, int]) -> bool:
    """Whether a plan's shape names this call (its type's rule; a region's sizes exactly)."""
    if kind == GENERIC:
        return dict(call) == dict(planned)
    return KINDS[kind].same_size(call, planned)
