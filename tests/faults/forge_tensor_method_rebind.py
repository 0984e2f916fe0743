# expect: FAIL smoke guards-off
"""Planted forgery: one line, allowed names only, rebinds a torch.Tensor method the comparison
uses, so a kernel that returns zeros would read "max abs err 0".

torch.Tensor.abs becomes torch.Tensor.zero_: every |got - expected| the harness computes in the
candidate's process is zeroed in place. Caught because the comparison runs in the judge, a
process that never imported this file: there the zeros are compared honestly and FAIL in the
smoke test.
"""

import torch
import triton
import triton.language as tl

KERNEL_TYPE = "reduce"

torch.Tensor.abs = torch.Tensor.zero_  # CHEAT: |error| is always 0 in this process


@triton.jit
def _unused_kernel(X, BLOCK: tl.constexpr):
    pass


def kernel_fn(x: torch.Tensor) -> torch.Tensor:
    return torch.zeros(x.shape[:-1], dtype=x.dtype, device=x.device)
