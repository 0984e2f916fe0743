# expect: CRASH import guards-off
"""Escape attempt: leave a daemon behind that outlives the evaluation.

A double fork with setsid detaches a process from the worker's session and process group, so
killing the group does not reach it. The import then raises (CRASH at import) either way; what
counts is whether the daemon is gone afterwards: tests/test_containment_attacks.py looks for
DAEMON_MARK in every process's command line. In the sandbox the daemon dies with the PID
namespace.
"""

import os
import sys

import torch
import triton
import triton.language as tl

KERNEL_TYPE = "reduce"
DAEMON_MARK = "autokernel-escape-daemon"


def _daemon() -> None:
    pid = os.fork()
    if pid == 0:
        os.setsid()
        if os.fork() == 0:
            os.execv(
                sys.executable, [sys.executable, "-c", "import time; time.sleep(120)", DAEMON_MARK]
            )
        os._exit(0)
    os.waitpid(pid, 0)


_daemon()
raise RuntimeError("daemon started")


@triton.jit
def _unused_kernel(X, BLOCK: tl.constexpr):
    pass


def kernel_fn(x: torch.Tensor) -> torch.Tensor:
    return torch.zeros(x.shape[:-1], dtype=x.dtype, device=x.device)
