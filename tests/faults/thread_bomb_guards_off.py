# expect: CRASH import guards-off
"""Planted attack on the host: the import starts threads until the system refuses one
(evaluated with guards off: with guards on, `import threading` is rejected statically).

Threads count against the same kernel limits as processes. The worker's task cap
(harness/task_cap.py) refuses a thread long before SELF_LIMIT: the import raises, and the
verdict is a CRASH at import. The threads that were started stay blocked until the worker ends.

So that a missing cap cannot take a machine down, the payload stops itself at SELF_LIMIT
(small stacks: about 20 MB in all), lets its threads end and imports cleanly; kernel_fn then
returns a wrong result: a FAIL in smoke, not the CRASH expected here.
"""

import threading

import torch
import triton
import triton.language as tl

KERNEL_TYPE = "reduce"
SELF_LIMIT = 3000  # far above the cap (264 tasks on 2 cores, 768 on 128)
STACK_BYTES = 64 << 10  # the smallest stack the payload needs; the default is 8 MiB

_release = threading.Event()
_threads = []
_previous = threading.stack_size(STACK_BYTES)
try:
    while len(_threads) < SELF_LIMIT:
        thread = threading.Thread(target=_release.wait, daemon=True)
        thread.start()
        _threads.append(thread)
except RuntimeError as exc:
    raise RuntimeError(f"thread refused after {len(_threads)} threads: {exc}") from None
finally:
    threading.stack_size(_previous)
_release.set()  # no cap stopped it
for thread in _threads:
    thread.join()


@triton.jit
def _unused_kernel(X, BLOCK: tl.constexpr):
    pass


def kernel_fn(x: torch.Tensor) -> torch.Tensor:
    return torch.zeros(x.shape[:-1], dtype=x.dtype, device=x.device)
