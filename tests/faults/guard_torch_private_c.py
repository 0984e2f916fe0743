# expect: REJECTED static
"""Planted escape: torch._C holds the whole C++ API, the dispatcher and the allocator
among it."""

import torch
import triton
import triton.language as tl

C = torch._C

KERNEL_TYPE = "softmax"


def kernel_fn(x: torch.Tensor) -> torch.Tensor:
    return torch.empty_like(x)
