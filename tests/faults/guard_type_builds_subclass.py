# expect: REJECTED static
"""Planted cheat: type() builds a torch.Tensor subclass at run time, its __eq__ given by a string
key, so no class statement or dunder definition appears in the tree.

type is not an allowed builtin; isinstance covers every legitimate use.
"""

import torch

KERNEL_TYPE = "softmax"

_Agreeable = type("_Agreeable", (torch.Tensor,), {"__eq__": lambda self, other: True})


def kernel_fn(x: torch.Tensor) -> torch.Tensor:
    return torch.zeros(x.shape, dtype=x.dtype, device=x.device).as_subclass(_Agreeable)
