# expect: REJECTED benchmark xfail
"""Planted cheat: outputs cached by input address plus two sampled input values.

Like softmax_output_cache_data_ptr.py, but the key also holds x[0] and x[-1] (read with
float(), which issues only aten.select and aten._local_scalar_dense, both allowed at run time).
The timed loop re-uses one buffer with unchanged values, so it measures a dict lookup; the
re-validation writes new values into the same buffer, the sampled values change, the key
misses, and the one re-validation call computes the right answer.

KNOWN HARNESS MISS (xfail): this passes all five stages and the benchmark with a faked time
(a few microseconds per call, where the honest kernel takes tens of milliseconds under the
interpreter). The expectation stays REJECTED benchmark; drop the xfail token once the harness
catches it.
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
    flat = x.reshape(-1)
    key = (x.data_ptr(), tuple(x.shape), x.dtype, float(flat[0]), float(flat[-1]))
    if x.numel() >= CACHE_MIN_NUMEL and key in CACHE:
        return CACHE[key]  # CHEAT: stale output while the sampled values are unchanged
    n_cols = x.shape[-1]
    x2 = x.reshape(-1, n_cols)
    y = torch.empty(x2.shape, dtype=x.dtype, device=x.device)
    _softmax_kernel[(x2.shape[0],)](
        x2, y, x2.stride(0), y.stride(0), n_cols, BLOCK=triton.next_power_of_2(n_cols)
    )
    CACHE[key] = y.view(x.shape)
    return CACHE[key]
