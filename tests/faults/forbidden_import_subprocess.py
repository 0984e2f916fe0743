# expect: REJECTED static
"""Planted cheat: imports subprocess (e.g. to run a precompiled binary or fetch results).

Only allow-listed modules may be imported; the static guard rejects the import.
"""

import subprocess

import torch
import triton
import triton.language as tl

KERNEL_TYPE = "reduce"


@triton.jit
def _unused_kernel(X, BLOCK: tl.constexpr):
    pass


def kernel_fn(x: torch.Tensor) -> torch.Tensor:
    subprocess.run(["true"], check=False)
    return torch.zeros(x.shape[:-1], dtype=x.dtype, device=x.device)
