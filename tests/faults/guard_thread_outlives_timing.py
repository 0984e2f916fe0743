# expect: REJECTED static
"""Planted cheat: a background thread keeps computing after kernel_fn returns, so the timed call
ends before its work does. Refused at the import of threading.
"""

import threading

import torch

KERNEL_TYPE = "reduce"


def kernel_fn(x: torch.Tensor) -> torch.Tensor:
    y = torch.empty(x.shape[:-1], dtype=x.dtype, device=x.device)
    threading.Thread(target=y.zero_).start()
    return y
