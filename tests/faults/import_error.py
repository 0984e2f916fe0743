# expect: CRASH import
"""Planted fault: uses a name that does not exist in an allowed module whose members the
static guard does not list (math), so the guard passes it; the worker's import of the
candidate fails."""

import math

import torch
import triton
import triton.language as tl

LIMIT = math.does_not_exist

KERNEL_TYPE = "reduce"


def kernel_fn(x: torch.Tensor) -> torch.Tensor:
    return torch.zeros(x.shape[:-1], dtype=x.dtype, device=x.device)
