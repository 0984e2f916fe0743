# expect: FAIL smoke guards-off
"""Planted forgery: kernel_fn launches nothing and returns a torch.Tensor subclass whose
conversion methods do the work when the harness reads the output.

The timed calls only allocate, so the "kernel" looks fast, and the op monitor (which watches
kernel_fn only) never sees the sum that any later torch function on the output computes. Caught because only an
output that is exactly torch.Tensor is handed to the judge: the subclass FAILs the smoke test
before any of its methods runs.
"""

import torch
import triton
import triton.language as tl

KERNEL_TYPE = "reduce"


@triton.jit
def _unused_kernel(X, BLOCK: tl.constexpr):
    pass


class Lazy(torch.Tensor):
    """Holds the input; whoever touches the result through torch (shape, dtype, conversion,
    arithmetic) gets the computed sum instead."""

    def done(self):
        return torch.Tensor.sum(self.source.float(), -1).to(self.source.dtype)  # CHEAT

    @classmethod
    def __torch_function__(cls, func, types, args=(), kwargs=None):
        def real(a):
            return a.done() if isinstance(a, Lazy) else a

        return func(*[real(a) for a in args], **{k: real(v) for k, v in (kwargs or {}).items()})


def kernel_fn(x: torch.Tensor) -> torch.Tensor:
    out = torch.empty(x.shape[:-1], dtype=x.dtype, device=x.device).as_subclass(Lazy)
    out.source = x
    return out
