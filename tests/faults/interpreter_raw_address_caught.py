# expect: CRASH smoke
"""Planted escape: the raw read of interpreter_raw_address_read, its exception caught, so the
kernel goes on to return a correct softmax: refusing the access is not enough when the refusal
can be swallowed.

The worker records every access outside the launch's arguments, and the call that made one is a
CRASH whatever the kernel did with the exception. On a GPU the fault is sticky: CRASH as well.
"""

import torch
import triton
import triton.language as tl

KERNEL_TYPE = "softmax"
SPY = torch.zeros(1, dtype=torch.int64)


@triton.jit
def _peek(OUT, addr):
    p = addr.to(tl.pointer_type(tl.int64))
    tl.store(OUT, tl.load(p))


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
    y = torch.empty_like(x2)
    _k[(x2.shape[0],)](x2, y, n, BLOCK=triton.next_power_of_2(n))
    return y.reshape(x.shape)


def kernel_fn(x: torch.Tensor) -> torch.Tensor:
    try:
        _peek[(1,)](SPY.to(x.device), id(KERNEL_TYPE))
    except Exception:
        pass
    return _softmax(x)
