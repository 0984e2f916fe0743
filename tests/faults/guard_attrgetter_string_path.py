# expect: REJECTED static
"""Planted escape: the attribute path to os.system hides in a string that operator.attrgetter
resolves at run time, on the triton module the guard otherwise lets through.

operator.attrgetter and methodcaller are refused, and so is any bare use of a module.
"""

import operator

import torch
import triton

KERNEL_TYPE = "softmax"

_system = operator.attrgetter("runtime.jit.os.system")(triton)


def kernel_fn(x: torch.Tensor) -> torch.Tensor:
    _system("true")
    return torch.zeros(x.shape, dtype=x.dtype, device=x.device)
