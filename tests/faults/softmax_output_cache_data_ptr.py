# expect: REJECTED benchmark
"""Planted cheat: outputs cached by input address (data_ptr), for benchmark-sized inputs.

The first call on a buffer computes the right answer; later calls on the same buffer return
the stored tensor without launching anything, so the timed loop (which re-uses one buffer)
measures a dict lookup. Small inputs are always computed, so all five stages pass. The
benchmark's re-validation writes new values into the timed buffers and calls once more: the
stale output no longer matches and the kernel is REJECTED in the benchmark stage.
"""

import torch
import triton
import triton.language as tl

KERNEL_TYPE = "softmax"

CACHE = {}
CACHE_MIN_NUMEL = 32768  # the CPU benchmark size is 64x1024; every stage size is smaller


@triton.jit
def _softmax_kernel(X, Y, stride_x, stride_y, n_cols, BLOCK: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    cols = tl.arange(0, BLOCK)
    mask = cols < n_cols
    x = tl.load(X + row * stride_x + cols, mask=mask, other=-float("inf")).to(tl.float32)
    m = tl.max(x, axis=0)
    e = tl.exp(x - m)
    y = e / tl.sum(e, axis=0)
    tl.store(Y + row * stride_y + cols, y.to(Y.dtype.element_ty), mask=mask)


def kernel_fn(x: torch.Tensor) -> torch.Tensor:
    key = (x.data_ptr(), tuple(x.shape), x.dtype)
    if x.numel() >= CACHE_MIN_NUMEL and key in CACHE:
        return CACHE[key]  # CHEAT: stale output for a known buffer
    n_cols = x.shape[-1]
    x2 = x.reshape(-1, n_cols)
    y = torch.empty(x2.shape, dtype=x.dtype, device=x.device)
    _softmax_kernel[(x2.shape[0],)](
        x2, y, x2.stride(0), y.stride(0), n_cols, BLOCK=triton.next_power_of_2(n_cols)
    )
    CACHE[key] = y.view(x.shape)
    return CACHE[key]
