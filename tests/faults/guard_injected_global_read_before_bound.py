# expect: CRASH import
"""Planted escape: the interpreter's globals, read in the window before the name is bound.

A name read in kernel.py must be defined there, so this file binds `inspect` itself, last. But a
launch at import time makes the Triton interpreter copy its module's globals into this one
(inspect among them), and _steal() runs after that launch and before the binding: it gets the
interpreter's inspect module and from it torch's module globals. The loader closes the window:
before the candidate's code runs, every global the interpreter would copy in is already bound
in the module (to None), so nothing is copied and _steal() fails (CRASH at import). Where the
window is open, the kernel returns zeros (FAIL in smoke): the escape worked.
"""

import torch
import triton
import triton.language as tl

KERNEL_TYPE = "reduce"


@triton.jit
def _reduce_kernel(X, Y, stride_x, n_cols, BLOCK: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    cols = tl.arange(0, BLOCK)
    x = tl.load(X + row * stride_x + cols, mask=cols < n_cols, other=0.0).to(tl.float32)
    tl.store(Y + row, tl.sum(x, axis=0).to(Y.dtype.element_ty))


def _steal() -> dict:
    return dict(inspect.getmembers(torch.is_tensor))["__globals__"]


_reduce_kernel[(1,)](torch.zeros(1, 1), torch.zeros(1), 1, 1, BLOCK=1)  # the first launch
STOLEN = _steal()
inspect = None


def kernel_fn(x: torch.Tensor) -> torch.Tensor:
    return torch.zeros(x.shape[:-1], dtype=x.dtype, device=x.device)
