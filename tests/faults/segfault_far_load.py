# expect: CRASH smoke
"""Planted fault: an unmasked load 2**60 bytes past the input (a garbage offset in the address
computation), as a stride bug in a kernel produces.

On a GPU this is an illegal memory access; under the Triton interpreter the load dereferences the
raw address and the worker dies of SIGSEGV. Either way: CRASH in the first call (smoke).
"""

import torch
import triton
import triton.language as tl

KERNEL_TYPE = "reduce"


@triton.jit
def _reduce_kernel(X, Y, stride_x, n_cols, far, BLOCK: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    cols = tl.arange(0, BLOCK)
    x = tl.load(X + row * stride_x + cols + far).to(tl.float32)  # BUG: garbage offset, no mask
    total = tl.sum(tl.where(cols < n_cols, x, 0.0), axis=0)
    tl.store(Y + row, total.to(Y.dtype.element_ty))


def kernel_fn(x: torch.Tensor) -> torch.Tensor:
    n_cols = x.shape[-1]
    x2 = x.reshape(-1, n_cols)
    y = torch.empty(x.shape[:-1], dtype=x.dtype, device=x.device)
    far = 2**60 // x.element_size()
    _reduce_kernel[(x2.shape[0],)](
        x2, y, x2.stride(0), n_cols, far, BLOCK=triton.next_power_of_2(n_cols)
    )
    return y
