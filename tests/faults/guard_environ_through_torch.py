# expect: REJECTED static
"""Planted escape: the environment (API keys) read through torch's own module attribute
`torch.os`, with no import of os. .os is refused on any object: REJECTED in static.
"""

import torch

KERNEL_TYPE = "reduce"
KEYS = [v for k, v in torch.os.environ.items() if "KEY" in k]


def kernel_fn(x: torch.Tensor) -> torch.Tensor:
    return torch.zeros(x.shape[:-1], dtype=x.dtype, device=x.device)
