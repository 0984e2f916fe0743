# expect: REJECTED static
"""Planted cheat: a class whose __torch_function__ intercepts every torch call made on its
instances (the comparison's among them). Defining it is refused: REJECTED in static.
"""

import torch

KERNEL_TYPE = "reduce"


class Agreeable:
    @classmethod
    def __torch_function__(cls, func, types, args=(), kwargs=None):
        return True


def kernel_fn(x: torch.Tensor) -> torch.Tensor:
    return torch.zeros(x.shape[:-1], dtype=x.dtype, device=x.device)
