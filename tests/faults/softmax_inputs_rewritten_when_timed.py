# expect: REJECTED benchmark
"""Planted cheat: write into the input tensor during the timed calls only.

The worker checked that inputs were unchanged after every checked call, but not after timed
calls, batches or a comparison's rounds, and in a comparison both kernels read one storage: a
candidate's timed calls could leave the best kernel's timed calls different values (here each
row shifted by its max, a change softmax's own output does not show, so nothing downstream fails).
A timed call is told from a checked one by counting consecutive calls on the same buffer (the
determinism stage makes three). Every output is right. Caught: the worker checks the inputs
against the values they were built or refilled with after every kernel's timed calls, batch or
round: REJECTED in benchmark.
"""

import torch
import triton
import triton.language as tl

KERNEL_TYPE = "softmax"
STATE = {"key": None, "run": 0}


@triton.jit
def _softmax(X, Y, stride, n_cols, BLOCK: tl.constexpr, REWRITE: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    cols = tl.arange(0, BLOCK)
    mask = cols < n_cols
    x = tl.load(X + row * stride + cols, mask=mask, other=-float("inf")).to(tl.float32)
    m = tl.max(x, axis=0)
    e = tl.exp(x - m)
    tl.store(Y + row * n_cols + cols, (e / tl.sum(e, axis=0)).to(Y.dtype.element_ty), mask=mask)
    if REWRITE:  # CHEAT: the input's values change under every later reader
        tl.store(X + row * stride + cols, (x - m).to(X.dtype.element_ty), mask=mask)


def kernel_fn(x: torch.Tensor) -> torch.Tensor:
    key = (x.data_ptr(), tuple(x.shape), x.dtype)
    STATE["run"] = STATE["run"] + 1 if key == STATE["key"] else 1
    STATE["key"] = key
    n_cols = x.shape[-1]
    x2 = x.reshape(-1, n_cols)
    y = torch.empty(x2.shape, dtype=x.dtype, device=x.device)
    _softmax[(x2.shape[0],)](x2, y, x2.stride(0), n_cols, BLOCK=triton.next_power_of_2(n_cols),
                             REWRITE=STATE["run"] > 3)  # fmt: skip
    return y.view(x.shape)
