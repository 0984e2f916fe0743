# expect: REJECTED determinism
"""Planted cheat: output buffers kept across calls, two per shape, handed out in turn.

Like softmax_output_buffer_kept.py, but the kernel alternates between two kept buffers, so no
call returns the memory of the call right before it: the worker holds only the previous call's
output, and an output landing in memory returned two calls ago is never looked at. Every value
is recomputed, so every check passes, yet a caller's result from two calls back is overwritten
under it (three layers of one shape would see the first one's output change). The determinism
stage calls three times on one shape: the third call returns the first call's memory.
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
    ring = BUFFERS.get(key)
    if ring is None:
        ring = BUFFERS.setdefault(key, [torch.empty_like(x2), torch.empty_like(x2), 0])
    ring[2] = 1 - ring[2]  # CHEAT: the buffer returned two calls ago, every other call
    y = ring[ring[2]]
    _k[(x2.shape[0],)](x2, y, n, BLOCK=triton.next_power_of_2(n))
    return y.reshape(x.shape)


def kernel_fn(x: torch.Tensor) -> torch.Tensor:
    return _softmax(x)
