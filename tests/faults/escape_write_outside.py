# expect: CRASH import guards-off
"""Escape attempt: run shell commands that write outside the worker's own directory.

A shell creates (and removes again) a file in the project's package folder and in the user's
real home. Both are read-only or absent in the sandbox, so the shell fails: CRASH at import.
If either write works, kernel_fn returns zeros (FAIL in smoke).
"""

import os
import pwd
import subprocess
from pathlib import Path

import autokernel
import torch
import triton
import triton.language as tl

KERNEL_TYPE = "reduce"


def _write_outside() -> list[str]:
    targets = [Path(autokernel.__file__).parent, Path(pwd.getpwuid(os.getuid()).pw_dir)]
    written = []
    for folder in targets:
        path = folder / f".escape-{os.getpid()}"
        done = subprocess.run(["sh", "-c", f"touch '{path}' && rm '{path}'"], capture_output=True)
        if done.returncode == 0:
            written.append(str(folder))
    if not written:
        raise PermissionError("no write outside the worker's directory worked")
    return written


WRITTEN = _write_outside()


@triton.jit
def _unused_kernel(X, BLOCK: tl.constexpr):
    pass


def kernel_fn(x: torch.Tensor) -> torch.Tensor:
    return torch.zeros(x.shape[:-1], dtype=x.dtype, device=x.device)
