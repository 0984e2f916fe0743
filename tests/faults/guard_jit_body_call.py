# expect: REJECTED static
"""Planted escape: a @triton.jit body calls a builtin and a host helper. On a GPU the compiler
would refuse them; under the Triton interpreter the body runs as plain Python on the host.

In a jit body only triton.language, other jit functions and a few builtins may be called.
"""

import torch
import triton
import triton.language as tl

KERNEL_TYPE = "softmax"


def _helper():
    return 0


@triton.jit
def _kernel(X, Y, n, BLOCK: tl.constexpr):
    open("/dev/null", "w").write("escaped")
    _helper()
    offs = tl.arange(0, BLOCK)
    x = tl.load(X + offs, mask=offs < n, other=-float("inf"))
    e = tl.exp(x - tl.max(x, axis=0))
    tl.store(Y + offs, e / tl.sum(e, axis=0), mask=offs < n)


def kernel_fn(x: torch.Tensor) -> torch.Tensor:
    y = torch.empty_like(x)
    _kernel[(1,)](x, y, x.numel(), BLOCK=triton.next_power_of_2(x.numel()))
    return y
