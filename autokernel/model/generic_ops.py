"""A generic kernel's place in the model: the op call for its route, outputs given back as the
model returned them.

The op (torch.ops.autokernel.generic, autokernel.model.kernel_ops) takes the region's tensors as one
list and returns one tensor; a region with several outputs (the q and k of a rotary function)
returns them flattened and concatenated, and here they are cut back into views of their own
shapes, computed from the traced output sizes at this call's symbol values.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch

from autokernel.model import kernel_ops
from autokernel.model.kernel_ops import LoadedKernel, Router
from autokernel.specs.size_expr import compile_expr


@dataclass
class GenericRoute:
    kernel: LoadedKernel
    router: Router
    slot: int

    def __post_init__(self) -> None:
        region = self.kernel.region
        assert region is not None
        sizes = region.meta.get("output_sizes") or [o["shape"] for o in region.meta["outputs"]]
        self._shapes = [[compile_expr(str(e)) for e in shape] for shape in sizes]

    def run(self, tensors: list[torch.Tensor]) -> object:
        out = kernel_ops.generic(list(tensors), self.slot)
        region = self.kernel.region
        assert region is not None
        if len(region.outputs) == 1:
            return out
        values = _values(region, tensors)
        parts, start = [], 0
        for fns in self._shapes:
            shape = [f(values) for f in fns]
            n = math.prod(shape)
            parts.append(out[start : start + n].view(shape))
            start += n
        return tuple(parts)


def _values(region, tensors: list[torch.Tensor]) -> dict[str, int]:
    """Each symbol's value at this call, read where an input's size or stride is it."""
    values: dict[str, int] = {}
    for t, spec in zip(tensors, region.inputs, strict=True):
        for e, n in (*zip(spec.sizes, t.shape, strict=True),
                     *zip(spec.strides, t.stride(), strict=True)):  # fmt: skip
            if e in region.symbols:
                values.setdefault(e, int(n))
    return values
