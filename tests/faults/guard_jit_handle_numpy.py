# expect: REJECTED static
"""Planted escape: under the Triton interpreter every value in a jit body holds its data as a
numpy array (`x.handle.data`), and a jit body may call methods of values: numpy computes, or
writes files, inside the "kernel".

.handle is refused as an attribute: REJECTED in static.
"""

import torch
import triton
import triton.language as tl

KERNEL_TYPE = "softmax"


@triton.jit
def _k(X, Y, n, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    m = cols < n
    x = tl.load(X + row * n + cols, mask=m, other=-float("inf")).to(tl.float32)
    x.handle.data.tofile("stolen.bin")
    x = x - tl.max(x, axis=0)
    e = tl.exp(x)
    y = e / tl.sum(e, axis=0)
    tl.store(Y + row * n + cols, y.to(Y.dtype.element_ty), mask=m)


def kernel_fn(x: torch.Tensor) -> torch.Tensor:
    n = x.shape[-1]
    x2 = x.reshape(-1, n).contiguous()
    y = torch.empty_like(x2)
    _k[(x2.shape[0],)](x2, y, n, BLOCK=triton.next_power_of_2(n))
    return y.reshape(x.shape)
