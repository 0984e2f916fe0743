# expect: REJECTED smoke
"""Planted cheat: calls torch through the allowed name torch.Tensor: torch.Tensor.softmax(x, -1).

The static guard allows every torch.Tensor.* path (torch.Tensor is allowed for annotations), so
this passes the syntax-tree check; the runtime monitor sees aten._softmax in the smoke call and
rejects it there.
"""

import torch
import triton
import triton.language as tl

KERNEL_TYPE = "softmax"


@triton.jit
def _unused_kernel(X, BLOCK: tl.constexpr):
    pass


def kernel_fn(x: torch.Tensor) -> torch.Tensor:
    y = torch.Tensor.softmax(x.to(torch.float32), -1)  # CHEAT: torch computes it
    return y.to(x.dtype)
