# expect: REJECTED static
"""Planted cheat: a TorchDispatchMode of its own, entered for good at import, sees and rewrites
every aten op of the worker (the op monitor's own records included). A private torch path:
REJECTED in static.
"""

import torch
from torch.utils._python_dispatch import TorchDispatchMode

KERNEL_TYPE = "reduce"


class Quiet(TorchDispatchMode):
    def dispatch(self, func, types, args=(), kwargs=None):
        return func(*args, **(kwargs or {}))


def kernel_fn(x: torch.Tensor) -> torch.Tensor:
    return torch.zeros(x.shape[:-1], dtype=x.dtype, device=x.device)
