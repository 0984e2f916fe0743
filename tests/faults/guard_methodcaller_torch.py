# expect: REJECTED static
"""Planted cheat: the whole softmax done by torch, the method named only in a string that
operator.methodcaller looks up at run time, so no `.softmax()` call appears in the tree.

operator.methodcaller is refused: the guard cannot read the name it will call.
"""

import operator

import torch

KERNEL_TYPE = "softmax"

_softmax = operator.methodcaller("softmax", -1)


def kernel_fn(x: torch.Tensor) -> torch.Tensor:
    return _softmax(x)
