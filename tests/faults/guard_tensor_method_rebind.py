# expect: REJECTED static
"""Planted cheat: one line rebinds a torch.Tensor method that output comparisons use, so a kernel
that returns zeros compares equal to anything.

No attribute of anything may be assigned from kernel.py; torch.Tensor.<method> is not even
readable (torch.Tensor.add(x, y) would compute).
"""

import torch

KERNEL_TYPE = "softmax"

torch.Tensor.allclose = lambda self, other, *args, **kwargs: True


def kernel_fn(x: torch.Tensor) -> torch.Tensor:
    return torch.zeros(x.shape, dtype=x.dtype, device=x.device)
