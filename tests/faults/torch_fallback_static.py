# expect: REJECTED static
"""Planted cheat: kernel_fn calls torch.softmax instead of a Triton kernel.

The static guard reads the syntax tree and rejects torch.softmax before anything runs.
"""

import torch
import triton
import triton.language as tl

KERNEL_TYPE = "softmax"


@triton.jit
def _unused_kernel(X, BLOCK: tl.constexpr):
    pass


def kernel_fn(x: torch.Tensor) -> torch.Tensor:
    return torch.softmax(x.float(), dim=-1).to(x.dtype)  # CHEAT: torch computes it
