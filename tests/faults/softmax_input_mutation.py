# expect: REJECTED smoke
"""Planted fault: the kernel writes its result into the input buffer (in place) and returns it.

The returned values are right, but the caller's x is destroyed; the harness compares every
input with its snapshot after the call and rejects the kernel.
"""

import torch
import triton
import triton.language as tl

KERNEL_TYPE = "softmax"


@triton.jit
def _softmax_kernel(X, stride_x, n_cols, BLOCK: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    cols = tl.arange(0, BLOCK)
    mask = cols < n_cols
    x = tl.load(X + row * stride_x + cols, mask=mask, other=-float("inf")).to(tl.float32)
    m = tl.max(x, axis=0)
    e = tl.exp(x - m)
    y = e / tl.sum(e, axis=0)
    tl.store(X + row * stride_x + cols, y.to(X.dtype.element_ty), mask=mask)  # BUG: in place


def kernel_fn(x: torch.Tensor) -> torch.Tensor:
    n_cols = x.shape[-1]
    x2 = x.view(-1, n_cols)
    _softmax_kernel[(x2.shape[0],)](x2, x2.stride(0), n_cols, BLOCK=triton.next_power_of_2(n_cols))
    return x
