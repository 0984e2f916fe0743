# expect: CRASH smoke guards-off
"""Planted attack on the host: kernel_fn starts processes until the system refuses one
(evaluated with guards off: with guards on, `import os` is rejected statically).

Each child execs `sleep` (a few hundred kilobytes, not a copy of the worker) and holds its
process slot. Uncapped, nothing stopped this before the host's own limits, which every other
process shares. The worker's task cap (harness/task_cap.py) refuses a fork long before
SELF_LIMIT: the fork raises, kernel_fn with it, and the verdict is a CRASH in smoke. The
children are left behind on purpose, as a real bomb leaves them: the evaluation's end must take
them along (tests/test_task_cap.py looks for BOMB_MARK afterwards).

So that a missing cap cannot take a machine down, the payload stops itself at SELF_LIMIT,
kills its children and returns a wrong result: a FAIL in smoke, not the CRASH expected here.
"""

import os
import signal

import torch
import triton
import triton.language as tl

KERNEL_TYPE = "reduce"
SELF_LIMIT = 3000  # far above the cap (264 tasks on 2 cores, 768 on 128) and far below pid_max
BOMB_MARK = "59.4711"  # sleep's argument: a duration no other process on the host sleeps


@triton.jit
def _unused_kernel(X, BLOCK: tl.constexpr):
    pass


def kernel_fn(x: torch.Tensor) -> torch.Tensor:
    children = []
    try:
        while len(children) < SELF_LIMIT:
            pid = os.fork()
            if pid == 0:
                try:
                    os.execv("/bin/sleep", ["sleep", BOMB_MARK])
                finally:
                    os._exit(127)
            children.append(pid)
    except OSError as exc:
        raise RuntimeError(f"fork refused after {len(children)} processes: {exc}") from None
    for pid in children:  # no cap stopped it: leave nothing behind, and fail
        os.kill(pid, signal.SIGKILL)
        os.waitpid(pid, 0)
    return torch.zeros(x.shape[:-1], dtype=x.dtype, device=x.device)
