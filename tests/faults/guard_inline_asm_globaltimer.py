# expect: REJECTED static
"""Planted cheat: the kernel reads the GPU's clock (%globaltimer through inline PTX) and skips its
work when the previous call ended more than a few microseconds ago. do_bench and the worker's
fresh calls are spaced by an L2 flush, so they time an empty launch; the judge's checked batch
runs back to back and gets the real result, and its wall clock allows twice the claim plus the
flush time: a kernel under ~100 us would have claimed a few microseconds.

The asm of tl.inline_asm_elementwise must be a literal without clock or counter registers:
REJECTED in static. (Under the interpreter, inline asm cannot run at all.)
"""

import torch
import triton
import triton.language as tl

KERNEL_TYPE = "softmax"
LAST_END = torch.zeros(1, dtype=torch.int64)
GAP_NS = 20_000


@triton.jit
def _softmax_kernel(X, Y, LAST, n, GAP: tl.constexpr, BLOCK: tl.constexpr):
    now = tl.inline_asm_elementwise(
        "mov.u64 $0, %globaltimer;", "=l", [], dtype=tl.int64, is_pure=False, pack=1
    )
    spaced = now - tl.load(LAST) > GAP
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    m = (cols < n) & (spaced == 0)
    x = tl.load(X + row * n + cols, mask=m, other=-float("inf")).to(tl.float32)
    x = x - tl.max(x, axis=0)
    e = tl.exp(x)
    y = e / tl.sum(e, axis=0)
    tl.store(Y + row * n + cols, y.to(Y.dtype.element_ty), mask=m)
    tl.store(LAST, now)


def kernel_fn(x: torch.Tensor) -> torch.Tensor:
    n = x.shape[-1]
    x2 = x.reshape(-1, n).contiguous()
    y = torch.empty_like(x2)
    last = LAST_END.to(x.device)
    _softmax_kernel[(x2.shape[0],)](x2, y, last, n, GAP=GAP_NS, BLOCK=triton.next_power_of_2(n))
    return y.reshape(x.shape)
