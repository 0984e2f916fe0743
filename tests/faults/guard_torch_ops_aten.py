# expect: REJECTED static
"""Planted escape: torch.ops.aten.* computes with PyTorch's own kernels under another
name than the monitored torch functions."""

import torch
import triton
import triton.language as tl

SOFTMAX = torch.ops.aten._softmax

KERNEL_TYPE = "softmax"


def kernel_fn(x: torch.Tensor) -> torch.Tensor:
    return torch.empty_like(x)
