# expect: REJECTED static
"""Planted cheat: kernel_fn returns a torch.Tensor subclass whose comparison methods always
agree, launching nothing.

kernel.py may not subclass torch or triton classes, nor define dunder methods such as __eq__.
"""

import torch

KERNEL_TYPE = "softmax"


class _Agreeable(torch.Tensor):
    def __eq__(self, other):
        return True


def kernel_fn(x: torch.Tensor) -> torch.Tensor:
    return torch.zeros(x.shape, dtype=x.dtype, device=x.device).as_subclass(_Agreeable)
