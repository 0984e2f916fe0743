# expect: REJECTED static
"""Planted escape: triton.runtime.driver.active gives the CUDA driver: streams,
launch and memory calls outside the harness's view."""

import torch
import triton
import triton.language as tl

DRIVER = triton.runtime.driver.active

KERNEL_TYPE = "softmax"


def kernel_fn(x: torch.Tensor) -> torch.Tensor:
    return torch.empty_like(x)
