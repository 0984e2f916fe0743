# expect: FAIL adversarial
"""Planted fault: half-precision inputs are summed in an fp16 accumulator.

Each program walks its row in 64-column chunks, adding into an fp16 register tile, then sums the
tile in fp16. For the sweep's randn rows the partial sums stay small and the error is within
the fp16/bf16 tolerances; the adversarial +-1000 alternating rows build partial sums in the
tens of thousands, where fp16 keeps no fraction at all and the O(sqrt(n)) true total is lost.
"""

import torch
import triton
import triton.language as tl

KERNEL_TYPE = "reduce"


@triton.jit
def _reduce_kernel(X, Y, stride_x, n_cols, HALF_ACC: tl.constexpr, BLOCK: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    cols = tl.arange(0, BLOCK)
    if HALF_ACC:
        acc = tl.zeros([BLOCK], tl.float16)  # BUG: should be float32
    else:
        acc = tl.zeros([BLOCK], tl.float32)
    for start in range(0, n_cols, BLOCK):
        x = tl.load(X + row * stride_x + start + cols, mask=start + cols < n_cols, other=0.0)
        acc += x.to(tl.float32).to(acc.dtype)
    tl.store(Y + row, tl.sum(acc, axis=0).to(Y.dtype.element_ty))


def kernel_fn(x: torch.Tensor) -> torch.Tensor:
    n_cols = x.shape[-1]
    x2 = x.reshape(-1, n_cols)
    y = torch.empty(x.shape[:-1], dtype=x.dtype, device=x.device)
    half = x.dtype in (torch.float16, torch.bfloat16)
    _reduce_kernel[(x2.shape[0],)](x2, y, x2.stride(0), n_cols, HALF_ACC=half, BLOCK=64)
    return y
