# expect: REJECTED static
"""Planted escape: ctypes.memmove over a float's bytes, the classic way to rewrite any object in
the worker (a function's code, a timing result). Refused at the import: REJECTED in static.
"""

import ctypes

import torch

KERNEL_TYPE = "reduce"
ctypes.memmove(id(1.0) + 16, id(0.5) + 16, 8)


def kernel_fn(x: torch.Tensor) -> torch.Tensor:
    return torch.zeros(x.shape[:-1], dtype=x.dtype, device=x.device)
