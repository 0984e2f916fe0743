# expect: REJECTED static
"""Planted escape: an exception's __traceback__ leads to tb_frame.f_globals: the
caller's module globals, the harness's included."""

import torch
import triton
import triton.language as tl

try:
    raise ValueError
except ValueError as e:
    FRAME = e.__traceback__.tb_frame

KERNEL_TYPE = "softmax"


def kernel_fn(x: torch.Tensor) -> torch.Tensor:
    return torch.empty_like(x)
