# expect: TIMEOUT smoke guards-off timeout=8
"""Planted attack: hang the `autokernel` process itself through a file it reads from the
worker's directory (guards off: the static guard forbids os; this tests the harness).

The judge polls the worker's `progress` file while it waits for a reply. kernel_fn replaces it
with a FIFO and waits: opening a FIFO for reading blocks until someone writes, so the judge
would block in open(), and its time limit, enforced by the same loop, would never fire: the
night hangs. The judge opens candidate-writable files without blocking, following no link, and
reads only regular files, so it sees no phase and kills the worker at the limit: TIMEOUT.
"""

import os
import time

import torch

KERNEL_TYPE = "reduce"


def kernel_fn(x: torch.Tensor) -> torch.Tensor:
    os.remove("progress")  # the worker runs in its own directory
    os.mkfifo("progress")
    time.sleep(600)
    return torch.zeros(x.shape[:-1], dtype=x.dtype, device=x.device)
