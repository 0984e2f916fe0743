# expect: REJECTED static
"""Planted escape: a generator's frame leads to the module's globals and from there to the
builtins, with no dunder attribute and no forbidden call name in the chain.

Frame and generator attributes (gi_frame, f_globals, f_back, ...) are refused like `os`.
"""

import torch

KERNEL_TYPE = "softmax"


def _gen():
    yield 0


def kernel_fn(x: torch.Tensor) -> torch.Tensor:
    g = _gen().gi_frame.f_builtins
    g["print"]("escaped")
    return torch.zeros(x.shape, dtype=x.dtype, device=x.device)
