# expect: FAIL smoke
"""Planted attack on the host: return a 16 GiB output that costs nothing to make.

torch.empty reserves address space without touching it, so the kernel returns at once. The
worker then wrote the whole output to its work directory on the host's disk for the judge
(4 GiB, the file size cap, before the write failed), and only the judge noticed the shape was
wrong: every call of such a kernel put gigabytes on the disk that results.tsv lives on, and
the evaluation ended in a CRASH at the cap. The worker compares the output's size with the
size the judge expects before it writes a byte: FAIL in smoke (wrong shape).
"""

import torch
import triton
import triton.language as tl

KERNEL_TYPE = "softmax"


@triton.jit
def _unused_kernel(X, BLOCK: tl.constexpr):
    pass


def kernel_fn(x: torch.Tensor) -> torch.Tensor:
    return torch.empty(1 << 34, dtype=torch.uint8, device=x.device)  # 16 GiB, untouched
