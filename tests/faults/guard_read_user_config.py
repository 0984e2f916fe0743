# expect: REJECTED static
"""Planted escape: the user's key file read through pathlib (`~/.config/autokernel`) and raised,
so it lands in the verdict. Refused at the import of pathlib.
"""

import pathlib

import torch

KERNEL_TYPE = "reduce"
raise ValueError((pathlib.Path.home() / ".config/autokernel/config.yaml").read_text())


def kernel_fn(x: torch.Tensor) -> torch.Tensor:
    return torch.zeros(x.shape[:-1], dtype=x.dtype, device=x.device)
