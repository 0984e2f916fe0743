# expect: CRASH import guards-off
"""Escape attempt: read the harness's environment (the user's API keys) through /proc.

Every /proc/<pid>/environ but the worker's own is scanned for a variable named like a key. In
its own PID namespace the worker sees only itself and the sandbox's first process, whose
environment is the worker's minimal one, so the search finds nothing and the import raises:
CRASH at import. A found key makes kernel_fn return zeros, a FAIL in smoke: the verdict shows
the attack worked (tests/test_containment_attacks.py plants a key in the harness's environment).
"""

import os
import re

import torch
import triton
import triton.language as tl

KERNEL_TYPE = "reduce"
_KEY_NAME = re.compile(rb"KEY|TOKEN|SECRET|PASSWORD", re.IGNORECASE)


def _steal() -> bytes:
    for pid in os.listdir("/proc"):
        if not pid.isdigit() or int(pid) == os.getpid():
            continue
        try:
            with open(f"/proc/{pid}/environ", "rb") as f:
                items = f.read().split(b"\0")
        except OSError:
            continue
        for item in items:
            if _KEY_NAME.search(item.split(b"=", 1)[0]):
                return item
    raise PermissionError("no other process's environment holds a key")


STOLEN = _steal()


@triton.jit
def _unused_kernel(X, BLOCK: tl.constexpr):
    pass


def kernel_fn(x: torch.Tensor) -> torch.Tensor:
    return torch.zeros(x.shape[:-1], dtype=x.dtype, device=x.device)
