# expect: REJECTED static
"""Planted escape: with postponed annotations (the __future__ import) the symbol table records
no name of an annotation, so `getattr` there was never judged. Whatever evaluates the string
later (typing's or inspect's helpers, reached some other way) hands the refused builtin back.

Annotation names follow the read rules even when postponed: REJECTED in static.
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

KERNEL_TYPE = "softmax"


def _smuggle(lookup: getattr) -> None:
    return None


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
