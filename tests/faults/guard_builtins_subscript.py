# expect: REJECTED static
"""Planted escape: open() fetched by subscript from __builtins__, so no call is named `open`.

Dunder names are refused, as is any builtin outside the allow-list, however it is reached.
"""

import torch

KERNEL_TYPE = "softmax"


def kernel_fn(x: torch.Tensor) -> torch.Tensor:
    __builtins__["open"]("/dev/null", "w").write("escaped")
    return torch.zeros(x.shape, dtype=x.dtype, device=x.device)
