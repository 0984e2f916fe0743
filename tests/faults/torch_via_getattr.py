# expect: REJECTED static
"""Planted cheat: reaches torch.softmax through getattr so that no `torch.softmax` appears.

getattr is a forbidden call in kernel.py: the static guard rejects it.
"""

import torch
import triton
import triton.language as tl

KERNEL_TYPE = "softmax"


@triton.jit
def _unused_kernel(X, BLOCK: tl.constexpr):
    pass


def kernel_fn(x: torch.Tensor) -> torch.Tensor:
    fn = getattr(torch, "soft" + "max")  # CHEAT: torch through reflection
    return fn(x, dim=-1)
