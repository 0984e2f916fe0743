# expect: REJECTED static
"""Planted forgery: torch.Tensor.__eq__ (and equal) rebound to agree always, so any comparison
made in this process passes. Assignment to attributes and dunders are refused: REJECTED in static.
"""

import torch

KERNEL_TYPE = "reduce"
torch.Tensor.__eq__ = lambda self, other: True


def kernel_fn(x: torch.Tensor) -> torch.Tensor:
    return torch.zeros(x.shape[:-1], dtype=x.dtype, device=x.device)
