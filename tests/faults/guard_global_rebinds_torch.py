# expect: REJECTED static
"""Planted escape: a global statement in a function rebinds the module's name torch
to a stand-in at call time."""

import torch
import triton
import triton.language as tl


def swap():
    global torch
    torch = None


KERNEL_TYPE = "softmax"


def kernel_fn(x: torch.Tensor) -> torch.Tensor:
    return torch.empty_like(x)
