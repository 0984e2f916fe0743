# expect: FAIL smoke guards-off
"""Planted forgery: replaces the reference of its own kernel type with one that returns zeros,
then returns zeros itself (guards off: the static guard forbids sys; this tests the judge).

The spec registry is reached through sys.modules and the frozen spec's reference is swapped
with object.__setattr__, so in the candidate's process the oracle agrees with the kernel.
Caught because the judge computes every reference in its own process, from its own registry:
the zeros FAIL the smoke test there.
"""

import sys

import torch
import triton
import triton.language as tl

KERNEL_TYPE = "reduce"


def _zeros_like_sum(x):
    return torch.zeros(x.shape[:-1], dtype=x.dtype, device=x.device)


_spec = sys.modules["autokernel.specs"].SPECS[KERNEL_TYPE]
object.__setattr__(_spec, "reference", _zeros_like_sum)  # CHEAT: the oracle says zeros


@triton.jit
def _unused_kernel(X, BLOCK: tl.constexpr):
    pass


def kernel_fn(x: torch.Tensor) -> torch.Tensor:
    return torch.zeros(x.shape[:-1], dtype=x.dtype, device=x.device)
