# expect: REJECTED static
"""Planted escape: a __del__ method runs whenever an object is collected, at a time
the candidate does not control: after the checks, inside the harness's code."""

import torch
import triton
import triton.language as tl


class Late:
    def __del__(self):
        print("ran after the checks")


KEEP = [Late()]

KERNEL_TYPE = "softmax"


def kernel_fn(x: torch.Tensor) -> torch.Tensor:
    return torch.empty_like(x)
