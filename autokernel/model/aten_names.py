"""Kernel types read off aten op names: how an op the matcher's records do not cover is typed.

The eager profile attributes ops to what the matcher claimed (autokernel.model.matcher, through
the recorded ranges). A profile of torch.compile's forward has no such ranges, only the ops the
compiled graph still calls (an extern matmul, an attention) and Inductor's kernels, so its time
is grouped by op name here. Which names are which type, and how each op's arguments give its
size, is the type's spec's (ModelSide.aten).
"""

from __future__ import annotations

from autokernel.model.kinds import KINDS

# aten op name -> (kernel type, its reader)
_BY_NAME = {
    name: (kind, parse) for kind, side in KINDS.items() for name, parse in side.aten.items()
}


def classify_op(event) -> tuple[str, dict[str, int], dict[str, object]]:
    """(kernel type or 'other', shape in the spec's dims, args) of a top-level aten op."""
    entry = _BY_NAME.get(event.name)
    found = entry[1](event) if entry is not None else None
    if entry is None or found is None:
        return "other", {}, {}
    return entry[0], found[0], found[1]
