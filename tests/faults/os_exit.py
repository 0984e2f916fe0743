# expect: REJECTED static
"""Planted fault: kernel_fn kills its own process with os._exit.

With guards on, `import os` (and the private attribute ._exit) are rejected statically.
The guards-off twin, os_exit_guards_off.py, shows the sandbox surviving the exit itself.
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
