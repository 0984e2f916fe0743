# expect: FAIL adversarial dtype=float32
"""Planted fault: one-pass variance, var = E[x^2] - E[x]^2, in fp32.

Exact enough for zero-mean rows (the sweep). For rows of mean 10 and std 0.1 both terms are
~100 and their difference ~0.01: fp32 cancellation leaves a relative error in the variance far
beyond the fp32 tolerance of 1e-4 (the fp16/bf16 tolerances still absorb it).
"""

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
    var = tl.sum(x * x, axis=0) / n_cols - mean * mean  # BUG: catastrophic cancellation
    rstd = tl.rsqrt(var + eps)
    w = tl.load(W + cols, mask=mask, other=0.0).to(tl.float32)
    b = tl.load(B + cols, mask=mask, other=0.0).to(tl.float32)
    y = (x - mean) * rstd * w + b
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
