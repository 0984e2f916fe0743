# expect: REJECTED static
"""Planted cheat: calls torch through the allowed name torch.Tensor: torch.Tensor.softmax(x, -1).

torch.Tensor is allowed for annotations only: the static guard refuses any member of it
(torch.Tensor.<method> computes, and is what a forged comparison would rebind).
"""

import torch
import triton
import triton.language as tl

KERNEL_TYPE = "softmax"


@triton.jit
def _unused_kernel(X, BLOCK: tl.constexpr):
    pass


def kernel_fn(x: torch.Tensor) -> torch.Tensor:
    y = torch.Tensor.softmax(x.to(torch.float32), -1)  # CHEAT: torch computes it
    return y.to(x.dtype)
