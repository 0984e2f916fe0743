# expect: CRASH sweep gpu=FAIL
"""Planted fault: the column mask of the load is `cols <= n_cols` (off by one).

Each row reads one element too many (the next row's first value, or whatever follows the buffer
for the last row), and that stray value joins the max and the sum. Power-of-two rows fill the
block exactly and hide it (the smoke size 4x256 passes); the sweep's 4x100 rows expose it. On a
GPU the stray value FAILs the output; the interpreter refuses the last row's read past the
buffer (an access outside every argument): CRASH there.
"""

import torch
import triton
import triton.language as tl

KERNEL_TYPE = "softmax"


@triton.jit
def _softmax_kernel(X, Y, stride_x, stride_y, n_cols, BLOCK: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    cols = tl.arange(0, BLOCK)
    load_mask = cols <= n_cols  # BUG: should be cols < n_cols
    x = tl.load(X + row * stride_x + cols, mask=load_mask, other=-float("inf")).to(tl.float32)
    m = tl.max(x, axis=0)
    e = tl.exp(x - m)
    y = e / tl.sum(e, axis=0)
    tl.store(Y + row * stride_y + cols, y.to(Y.dtype.element_ty), mask=cols < n_cols)


def kernel_fn(x: torch.Tensor) -> torch.Tensor:
    n_cols = x.shape[-1]
    x2 = x.reshape(-1, n_cols)
    y = torch.empty(x2.shape, dtype=x.dtype, device=x.device)
    _softmax_kernel[(x2.shape[0],)](
        x2, y, x2.stride(0), y.stride(0), n_cols, BLOCK=triton.next_power_of_2(n_cols)
    )
    return y.view(x.shape)
