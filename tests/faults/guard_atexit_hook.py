# expect: REJECTED static
"""Planted cheat: an atexit hook runs after the last request, when the worker's files are
thought final, and rewrites them. Refused at the import of atexit.
"""

import atexit

import torch

KERNEL_TYPE = "reduce"
atexit.register(print, '{"status": "PASS"}')


def kernel_fn(x: torch.Tensor) -> torch.Tensor:
    return torch.zeros(x.shape[:-1], dtype=x.dtype, device=x.device)
