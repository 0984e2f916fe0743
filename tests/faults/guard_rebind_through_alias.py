# expect: REJECTED static
"""Planted cheat: the same rebinding through a local alias of the class, so no torch.<name> chain
on the assignment's left side names the method.

Every attribute assignment is refused, whatever object it goes through.
"""

import torch

KERNEL_TYPE = "softmax"

T = torch.Tensor
T.equal = lambda self, other: True


def kernel_fn(x: torch.Tensor) -> torch.Tensor:
    return torch.zeros(x.shape, dtype=x.dtype, device=x.device)
