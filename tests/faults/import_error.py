# expect: CRASH import
"""Planted fault: imports a module that does not exist (an allowed root, so the static guard
passes it); the worker's import of the candidate fails."""

import torch
import triton
import triton.does_not_exist
import triton.language as tl

KERNEL_TYPE = "reduce"


def kernel_fn(x: torch.Tensor) -> torch.Tensor:
    return torch.zeros(x.shape[:-1], dtype=x.dtype, device=x.device)
