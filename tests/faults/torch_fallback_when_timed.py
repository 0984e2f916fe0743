# expect: REJECTED benchmark
"""Planted cheat: a Triton kernel whenever the call is checked, torch's own reduction
(`x.nansum(-1)`, a name the static guard does not list) whenever it is timed.

The runtime monitor watched only the checked calls. A timed call is easy to tell apart without
any clock: the same input buffer comes back again (the timed loop re-uses the last checked call's
tensors) at a benchmark size (published in the spec). Every output is right and the judge's batch
of calls agrees with the claimed time, so the figure reported is torch's, not the kernel's.
Caught because the judge's batch runs under the monitor too: aten.nansum there is REJECTED in
the benchmark.
"""

import torch
import triton
import triton.language as tl

KERNEL_TYPE = "reduce"
BENCH_SHAPES = {(64, 1024), (4096, 50257), (16384, 8192), (262144, 128)}  # CPU, then GPU
SEEN: dict = {}


@triton.jit
def _reduce_kernel(X, Y, stride_x, n_cols, BLOCK: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    cols = tl.arange(0, BLOCK)
    acc = tl.zeros([BLOCK], tl.float32)
    for start in range(0, n_cols, BLOCK):
        x = tl.load(X + row * stride_x + start + cols, mask=start + cols < n_cols, other=0.0)
        acc += x.to(tl.float32)
    tl.store(Y + row, tl.sum(acc, axis=0).to(Y.dtype.element_ty))


def kernel_fn(x: torch.Tensor) -> torch.Tensor:
    key = (x.data_ptr(), tuple(x.shape), x.dtype)
    if tuple(x.shape) in BENCH_SHAPES and key in SEEN:
        return x.nansum(-1)  # CHEAT: timed calls are torch's
    SEEN[key] = True
    n_cols = x.shape[-1]
    x2 = x.reshape(-1, n_cols)
    y = torch.empty(x.shape[:-1], dtype=x.dtype, device=x.device)
    _reduce_kernel[(x2.shape[0],)](x2, y, x2.stride(0), n_cols, BLOCK=1024)
    return y
