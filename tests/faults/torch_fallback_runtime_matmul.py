# expect: REJECTED smoke
"""Planted cheat: kernel_fn computes `A @ B` with torch (an operator, so no forbidden name).

Nothing in the syntax tree names a torch function, so the static guard lets it through; the
runtime monitor sees aten.mm issued during the first (smoke) call and rejects it.
"""

import torch
import triton
import triton.language as tl

KERNEL_TYPE = "matmul"


@triton.jit
def _unused_kernel(X, BLOCK: tl.constexpr):
    pass


def kernel_fn(A: torch.Tensor, B: torch.Tensor) -> torch.Tensor:
    if A.dtype == torch.float32:
        return A @ B  # CHEAT: torch computes it
    return (A.to(torch.float32) @ B.to(torch.float32)).to(A.dtype)
