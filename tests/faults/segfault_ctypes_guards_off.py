# expect: CRASH smoke guards-off
"""Planted fault: kernel_fn dereferences a null pointer through ctypes (evaluated with guards off;
with guards on, `import ctypes` is rejected statically).

The worker dies of SIGSEGV; the sandbox reports a CRASH in the smoke phase.
"""

import ctypes

import torch
import triton
import triton.language as tl

KERNEL_TYPE = "reduce"


@triton.jit
def _unused_kernel(X, BLOCK: tl.constexpr):
    pass


def kernel_fn(x: torch.Tensor) -> torch.Tensor:
    ctypes.string_at(0)  # SIGSEGV
    return torch.zeros(x.shape[:-1], dtype=x.dtype, device=x.device)
