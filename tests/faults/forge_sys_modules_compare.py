# expect: FAIL smoke guards-off
"""Planted forgery: patches the harness's comparison through sys.modules so that any output
passes, then returns zeros (guards off: the static guard forbids sys; this tests the judge).

Every module of autokernel.harness loaded in the candidate's process gets a compare() that
finds no mismatch and a shape check that finds no problem. Caught because those modules do not
judge anything any more: the judge, in another process, compares the zeros and FAILs them.
"""

import sys

import torch
import triton
import triton.language as tl

KERNEL_TYPE = "reduce"

for _name, _module in list(sys.modules.items()):
    if _name.startswith("autokernel.harness"):
        if hasattr(_module, "compare"):
            _module.compare = lambda *a, **k: None  # CHEAT: no mismatch, ever
        if hasattr(_module, "shape_dtype_error"):
            _module.shape_dtype_error = lambda *a, **k: None


@triton.jit
def _unused_kernel(X, BLOCK: tl.constexpr):
    pass


def kernel_fn(x: torch.Tensor) -> torch.Tensor:
    return torch.zeros(x.shape[:-1], dtype=x.dtype, device=x.device)
