# expect: REJECTED smoke
"""Planted cheat: one output buffer per shape, kept in a module-level dict and returned by every
call (the kernel recomputes it each time, so every value is right). It saves the allocation's
host time, and in a model the earlier call's result changes under its caller: two layers of one
shape would share one output.

The worker holds each stage call's output until the next call, so fresh memory cannot land at
that address again: a later output there was kept by the kernel. REJECTED in smoke, whose two
calls share a size.
"""

import torch
import triton
import triton.language as tl

KERNEL_TYPE = "softmax"
BUFFERS = {}


@triton.jit
def _k(X, Y, n, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    m = cols < n
    x = tl.load(X + row * n + cols, mask=m, other=-float("inf")).to(tl.float32)
    x = x - tl.max(x, axis=0)
    e = tl.exp(x)
    y = e / tl.sum(e, axis=0)
    tl.store(Y + row * n + cols, y.to(Y.dtype.element_ty), mask=m)


def _softmax(x):
    n = x.shape[-1]
    x2 = x.reshape(-1, n).contiguous()
    key = (tuple(x2.shape), x2.dtype, x2.device)
    y = BUFFERS.get(key)
    if y is None:
        y = BUFFERS.setdefault(key, torch.empty_like(x2))
    _k[(x2.shape[0],)](x2, y, n, BLOCK=triton.next_power_of_2(n))
    return y.reshape(x.shape)


def kernel_fn(x: torch.Tensor) -> torch.Tensor:
    return _softmax(x)
