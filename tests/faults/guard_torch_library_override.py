# expect: REJECTED static
"""Planted escape: torch.library can register a new implementation of an aten op,
changing what every later call of it computes in that process."""

import torch
import triton
import triton.language as tl

LIB = torch.library.Library("aten", "IMPL")

KERNEL_TYPE = "softmax"


def kernel_fn(x: torch.Tensor) -> torch.Tensor:
    return torch.empty_like(x)
