# expect: FAIL smoke
"""Planted fault: the bias is loaded but never added (y = xhat * w)."""

import torch
import triton
import triton.language as tl

KERNEL_TYPE = "layernorm"


@triton.jit
def _layernorm_kernel(X, W, B, Y, stride_x, stride_y, n_cols, eps, BLOCK: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    cols = tl.arange(0, BLOCK)
    mask = cols < n_cols
    x = tl.load(X + row * stride_x + cols, mask=mask, other=0.0).to(tl.float32)
    mean = tl.sum(x, axis=0) / n_cols
    xc = tl.where(mask, x - mean, 0.0)
    rstd = tl.rsqrt(tl.sum(xc * xc, axis=0) / n_cols + eps)
    w = tl.load(W + cols, mask=mask, other=0.0).to(tl.float32)
    b = tl.load(B + cols, mask=mask, other=0.0).to(tl.float32)
    y = xc * rstd * w  # BUG: + b
    tl.store(Y + row * stride_y + cols, y.to(Y.dtype.element_ty), mask=mask)


def kernel_fn(x, weight, bias, eps: float = 1e-5):
    n_cols = x.shape[-1]
    x2 = x.reshape(-1, n_cols)
    y = torch.empty(x2.shape, dtype=x.dtype, device=x.device)
    _layernorm_kernel[(x2.shape[0],)](
        x2,
        weight,
        bias,
        y,
        x2.stride(0),
        y.stride(0),
        n_cols,
        eps,
        BLOCK=triton.next_power_of_2(n_cols),
    )
    return y.view(x.shape)
