# expect: CRASH import
"""Planted fault: a syntax error (unbalanced parenthesis); the parent cannot even parse it."""

import torch
import triton
import triton.language as tl

KERNEL_TYPE = "reduce"


def kernel_fn(x: torch.Tensor) -> torch.Tensor:
    return torch.zeros(x.shape[:-1], dtype=x.dtype, device=x.device
