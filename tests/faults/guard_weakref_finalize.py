# expect: REJECTED static
"""Planted escape: weakref.finalize runs a callback at collection time, like __del__."""

import weakref

import torch
import triton
import triton.language as tl

KERNEL_TYPE = "softmax"


def kernel_fn(x: torch.Tensor) -> torch.Tensor:
    return torch.empty_like(x)
