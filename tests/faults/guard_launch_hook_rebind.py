# expect: REJECTED static
"""Planted escape: a Triton launch hook set from kernel.py runs on every launch, the
harness's own timed ones included, and can fake or skew them."""

import torch
import triton
import triton.language as tl

triton.knobs.runtime.launch_enter_hook = print

KERNEL_TYPE = "softmax"


def kernel_fn(x: torch.Tensor) -> torch.Tensor:
    return torch.empty_like(x)
