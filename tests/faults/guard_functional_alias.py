# expect: REJECTED static
"""Planted escape: torch.nn.functional imported under another name still computes
with PyTorch."""

import torch
import torch.nn.functional as fn
import triton
import triton.language as tl

SOFT = fn.softmax

KERNEL_TYPE = "softmax"


def kernel_fn(x: torch.Tensor) -> torch.Tensor:
    return torch.empty_like(x)
