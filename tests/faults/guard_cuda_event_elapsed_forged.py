# expect: REJECTED static
"""Planted escape: rebinding torch.cuda.Event.elapsed_time makes every timing read
near zero."""

import torch
import triton
import triton.language as tl

torch.cuda.Event.elapsed_time = lambda self, end: 0.001

KERNEL_TYPE = "softmax"


def kernel_fn(x: torch.Tensor) -> torch.Tensor:
    return torch.empty_like(x)
