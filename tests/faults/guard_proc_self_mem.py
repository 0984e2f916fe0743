# expect: REJECTED static
"""Planted escape: /proc/self/mem opened for writing rewrites the worker's own memory (no ctypes
needed). open() is not an allowed builtin: REJECTED in static.
"""

import torch

KERNEL_TYPE = "reduce"

with open("/proc/self/mem", "r+b") as mem:
    mem.seek(id(KERNEL_TYPE))
    mem.write(b"\0")


def kernel_fn(x: torch.Tensor) -> torch.Tensor:
    return torch.zeros(x.shape[:-1], dtype=x.dtype, device=x.device)
