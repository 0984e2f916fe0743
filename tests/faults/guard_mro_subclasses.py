# expect: REJECTED static
"""Planted escape: the classic walk from any object to every loaded class
(().__class__.__mro__[-1].__subclasses__()) reaches os and subprocess."""

import torch
import triton
import triton.language as tl

EVERYTHING = ().__class__.__mro__[-1].__subclasses__()

KERNEL_TYPE = "softmax"


def kernel_fn(x: torch.Tensor) -> torch.Tensor:
    return torch.empty_like(x)
