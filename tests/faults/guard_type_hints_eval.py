# expect: REJECTED static
"""Planted escape: typing.get_type_hints evaluates string annotations: any expression
in one runs."""

import typing

import torch
import triton
import triton.language as tl


def f(a: "print('payload')") -> None:
    return None


HINTS = typing.get_type_hints(f)

KERNEL_TYPE = "softmax"


def kernel_fn(x: torch.Tensor) -> torch.Tensor:
    return torch.empty_like(x)
