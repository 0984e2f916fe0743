# expect: REJECTED static
"""Planted clock: an autotuned kernel's .do_bench is Triton's benchmarker (triton.testing's
do_bench on a GPU), a device clock reached with no refused name. With a clock a kernel tells
the worker's timed calls (spaced by the L2 flush) from the judge's checked ones (back to back)
and skips its work in the former; the static guard refuses %globaltimer and clock64() for the
same reason. Under the interpreter there is no driver and the lookup raises, so here the kernel
falls back to honest work, and passed: the guard never saw the clock.

.do_bench is refused on any object: REJECTED in static.
"""

import torch
import triton
import triton.language as tl

KERNEL_TYPE = "softmax"


@triton.jit
def _k(X, Y, n, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    m = cols < n
    x = tl.load(X + row * n + cols, mask=m, other=-float("inf")).to(tl.float32)
    x = x - tl.max(x, axis=0)
    e = tl.exp(x)
    y = e / tl.sum(e, axis=0)
    tl.store(Y + row * n + cols, y.to(Y.dtype.element_ty), mask=m)


_tuned = triton.autotune([triton.Config({})], key=["n"])(_k)
STATE = {"clock": None}


def _clock():
    if STATE["clock"] is None:
        try:
            STATE["clock"] = _tuned.do_bench  # CHEAT: a device clock
        except Exception:
            STATE["clock"] = False  # no GPU driver under the interpreter
    return STATE["clock"]


def kernel_fn(x: torch.Tensor) -> torch.Tensor:
    _clock()
    n = x.shape[-1]
    x2 = x.reshape(-1, n).contiguous()
    y = torch.empty_like(x2)
    _tuned[(x2.shape[0],)](x2, y, n, BLOCK=triton.next_power_of_2(n))
    return y.reshape(x.shape)
