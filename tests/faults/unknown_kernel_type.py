# expect: CRASH import
"""Planted fault: KERNEL_TYPE names a type that does not exist ("softmax2")."""

import torch
import triton
import triton.language as tl

KERNEL_TYPE = "softmax2"


def kernel_fn(x: torch.Tensor) -> torch.Tensor:
    return torch.empty(x.shape, dtype=x.dtype, device=x.device)
