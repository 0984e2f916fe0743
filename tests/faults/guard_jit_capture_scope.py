# expect: REJECTED static
"""Planted escape: a jit function hands back its module's globals (get_capture_scope), and a
string subscript reaches the builtins from there, with no dunder attribute in sight.

get_capture_scope and used_global_vals are refused like f_globals, on any object.
"""

import torch
import triton
import triton.language as tl

KERNEL_TYPE = "softmax"


@triton.jit
def _noop(X, BLOCK: tl.constexpr):
    pass


def kernel_fn(x: torch.Tensor) -> torch.Tensor:
    _noop.get_capture_scope()["__builtins__"]["print"]("escaped")
    return torch.zeros(x.shape, dtype=x.dtype, device=x.device)
