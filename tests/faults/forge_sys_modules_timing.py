# expect: REJECTED benchmark guards-off
"""Planted forgery: a correct kernel whose process reports a 0.5 us median through patched
harness timing functions (guards off: the static guard forbids sys; this tests the judge).

Every loaded autokernel.harness module's measure(), single_calls_us() and wall_per_call_us()
are replaced through sys.modules, so the candidate's process claims 0.5 us per call and its own
hidden-work and fresh-data checks agree with the claim. Caught because the judge times a batch
of calls with its own clock, in another process: the wall time per call is far above the claim.
"""

import sys

import torch
import triton
import triton.language as tl

KERNEL_TYPE = "reduce"


def _fake_measure(fn, on_gpu):
    fn()
    timing = sys.modules["autokernel.timing"]
    return timing.Measurement(0.5, 0.5, 0.5)  # CHEAT: 0.5 us, whatever fn costs


def _fake_single_calls(fn, before, on_gpu, calls):
    for i in range(calls):
        before(i)
        fn()
    return [0.5] * calls


for _name, _module in list(sys.modules.items()):
    if _name.startswith("autokernel.harness"):
        if hasattr(_module, "measure"):
            _module.measure = _fake_measure
        if hasattr(_module, "single_calls_us"):
            _module.single_calls_us = _fake_single_calls
        if hasattr(_module, "wall_per_call_us"):
            _module.wall_per_call_us = lambda fn, on_gpu, calls=20: 0.5


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
    n_cols = x.shape[-1]
    x2 = x.reshape(-1, n_cols)
    y = torch.empty(x.shape[:-1], dtype=x.dtype, device=x.device)
    _reduce_kernel[(x2.shape[0],)](x2, y, x2.stride(0), n_cols, BLOCK=1024)
    return y
