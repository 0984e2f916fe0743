# expect: CRASH smoke guards-off
"""Planted fault: kernel_fn kills its own process with os._exit (evaluated with guards off).

The worker dies without writing a verdict; the sandbox reports a CRASH in the phase the worker
had reached (the smoke test's first call).
"""

import os

import torch
import triton
import triton.language as tl

KERNEL_TYPE = "reduce"


@triton.jit
def _unused_kernel(X, BLOCK: tl.constexpr):
    pass


def kernel_fn(x: torch.Tensor) -> torch.Tensor:
    os._exit(3)
