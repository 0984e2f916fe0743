# expect: REJECTED static
"""Planted escape: triton.language.extra leads to importlib's module_from_spec: a
module loaded from any path runs its code in the worker."""

import torch
import triton
import triton.language as tl

LOADER = tl.extra.module_from_spec

KERNEL_TYPE = "softmax"


def kernel_fn(x: torch.Tensor) -> torch.Tensor:
    return torch.empty_like(x)
