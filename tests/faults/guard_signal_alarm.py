# expect: REJECTED static
"""Planted cheat: a SIGALRM handler fires in the middle of the judge's requests and answers in the
worker's place. Refused at the import of signal.
"""

import signal

import torch

KERNEL_TYPE = "reduce"
signal.signal(signal.SIGALRM, lambda *a: print('{"ok": true}'))
signal.setitimer(signal.ITIMER_REAL, 0.5, 0.5)


def kernel_fn(x: torch.Tensor) -> torch.Tensor:
    return torch.zeros(x.shape[:-1], dtype=x.dtype, device=x.device)
