# expect: TIMEOUT smoke timeout=8
"""Planted fault: kernel_fn never returns (`while True: pass`, a retry loop with no exit).

Python code cannot be interrupted from outside the process: the sandbox must kill the worker's
process group when the limit expires and report a TIMEOUT in the smoke phase.
"""

import torch
import triton
import triton.language as tl

KERNEL_TYPE = "reduce"


@triton.jit
def _unused_kernel(X, BLOCK: tl.constexpr):
    pass


def kernel_fn(x: torch.Tensor) -> torch.Tensor:
    while True:  # BUG: never exits
        pass
