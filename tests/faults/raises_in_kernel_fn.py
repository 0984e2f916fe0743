# expect: CRASH smoke
"""Planted fault: kernel_fn raises (a launch-parameter check that rejects every real input).

The harness reports the candidate's exception as a CRASH of the first call, with its traceback.
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


def kernel_fn(x: torch.Tensor) -> torch.Tensor:
    n_cols = x.shape[-1]
    if n_cols > 128:  # BUG: a leftover limit from a register-only prototype
        raise ValueError(f"rows of {n_cols} columns are not supported (max 128)")
    x2 = x.reshape(-1, n_cols)
    y = torch.empty(x.shape[:-1], dtype=x.dtype, device=x.device)
    _reduce_kernel[(x2.shape[0],)](
        x2, y, x2.stride(0), n_cols, BLOCK=triton.next_power_of_2(n_cols)
    )
    return y
