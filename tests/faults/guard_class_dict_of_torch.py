# expect: REJECTED static
"""Planted escape: vars() of a torch class gives its method table to rewrite."""

import torch
import triton
import triton.language as tl

TABLE = vars(torch.Tensor)

KERNEL_TYPE = "softmax"


def kernel_fn(x: torch.Tensor) -> torch.Tensor:
    return torch.empty_like(x)
