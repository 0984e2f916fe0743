# expect: REJECTED static
"""Planted escape: os.fork() leaves a copy of the worker running after the evaluation. Refused
at the import of os.
"""

import os

import torch

KERNEL_TYPE = "reduce"
if os.fork() == 0:
    os.setsid()


def kernel_fn(x: torch.Tensor) -> torch.Tensor:
    return torch.zeros(x.shape[:-1], dtype=x.dtype, device=x.device)
