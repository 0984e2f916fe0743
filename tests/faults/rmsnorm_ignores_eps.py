# expect: FAIL adversarial
"""Planted fault: rsqrt(mean(x^2)) without + eps.

With eps = 1e-6 and mean(x^2) ~ 1 the difference is 5e-7 relative, invisible in the sweep;
the adversarial rows have mean(x^2) = eps, where dropping it is off by a factor sqrt(2).
"""

import torch
import triton
import triton.language as tl

KERNEL_TYPE = "rmsnorm"


@triton.jit
def _rmsnorm_kernel(X, W, Y, stride_x, stride_y, n_cols, eps, BLOCK: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    cols = tl.arange(0, BLOCK)
    mask = cols < n_cols
    x = tl.load(X + row * stride_x + cols, mask=mask, other=0.0).to(tl.float32)
    w = tl.load(W + cols, mask=mask, other=0.0).to(tl.float32)
    rstd = tl.rsqrt(tl.sum(x * x, axis=0) / n_cols)  # BUG: + eps is missing
    tl.store(Y + row * stride_y + cols, (x * rstd * w).to(Y.dtype.element_ty), mask=mask)


def kernel_fn(x: torch.Tensor, weight: torch.Tensor, eps: float = 1e-6) -> torch.Tensor:
    n_cols = x.shape[-1]
    x2 = x.reshape(-1, n_cols)
    y = torch.empty(x2.shape, dtype=x.dtype, device=x.device)
    _rmsnorm_kernel[(x2.shape[0],)](
        x2,
        weight,
        y,
        x2.stride(0),
        y.stride(0),
        n_cols,
        eps,
        BLOCK=triton.next_power_of_2(n_cols),
    )
    return y.view(x.shape)
