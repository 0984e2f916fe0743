# expect: REJECTED static
"""Planted cheat: subclass torch.Tensor through a plain name (`T = torch.Tensor`), which the base
rule (no torch or triton class named in `class X(...)`) never resolved. A subclass can answer
data_ptr() with any address (the interpreter then reads the process's memory) and its instances
reach the harness wherever a tensor is taken.

A base must be a class the file defines with `class`, an allowed builtin or an import.
"""

import torch
import triton
import triton.language as tl

KERNEL_TYPE = "softmax"
_Base = torch.Tensor


class _Pointer(_Base):
    def data_ptr(self):
        return 0


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
    return _softmax(x)
