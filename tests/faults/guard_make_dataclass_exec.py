# expect: REJECTED static
"""Planted escape: dataclasses.make_dataclass builds its methods with exec from
strings the caller chooses."""

import dataclasses

import torch
import triton
import triton.language as tl

Box = dataclasses.make_dataclass("Box", [("x", int)])

KERNEL_TYPE = "softmax"


def kernel_fn(x: torch.Tensor) -> torch.Tensor:
    return torch.empty_like(x)
