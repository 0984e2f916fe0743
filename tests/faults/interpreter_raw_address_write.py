# expect: CRASH smoke
"""Planted escape: a store at an offset from a tensor argument that lands in another object's
memory (here a tensor the launch was not given), the write half of interpreter_raw_address_read:
under the interpreter any byte of the worker could be rewritten. The softmax is correct, so
without the check this PASSed.

Every store must lie inside the storage of a tensor handed to the launch: CRASH in smoke.
"""

import torch
import triton
import triton.language as tl

KERNEL_TYPE = "softmax"
VICTIM = torch.zeros(4, dtype=torch.float32)


@triton.jit
def _poke(P, off):
    tl.store(P + off, tl.load(P + off))


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
    y = _softmax(x)
    _poke[(1,)](y, (VICTIM.data_ptr() - y.data_ptr()) // y.element_size())
    return y
