# expect: REJECTED smoke
"""Planted cheat: no Triton launch at all; the softmax is computed in Python scalars.

float(x[i, j]) issues only aten.select and aten._local_scalar_dense, and `y[i, j] = v` only
aten.select and aten.fill_, all on the runtime monitor's allow list; builtins max/sum and the
** operator are not on the static guard's lists. The arithmetic runs outside the kernel, which
the contract forbids, exactly like a torch fallback.

KNOWN HARNESS MISS (xfail): this passes all five stages. It is hopelessly slow, so it cannot fake
speed, but it is a kernel.py that computes its result outside any kernel. The expectation is the
torch fallback's (REJECTED at its first call); drop the xfail token once the harness catches it
(e.g. by requiring a kernel launch, or by flagging _local_scalar_dense outside the interpreter).
"""

import torch
import triton
import triton.language as tl

KERNEL_TYPE = "softmax"
E = 2.718281828459045


@triton.jit
def _unused_kernel(X, BLOCK: tl.constexpr):
    pass


def kernel_fn(x: torch.Tensor) -> torch.Tensor:
    n_cols = x.shape[-1]
    x2 = x.reshape(-1, n_cols)
    y = torch.empty(x2.shape, dtype=x.dtype, device=x.device)
    for i in range(x2.shape[0]):
        vals = [float(x2[i, j]) for j in range(n_cols)]  # CHEAT: compute on the host
        m = max(vals)
        es = [E ** (v - m) if v != -float("inf") else 0.0 for v in vals]
        s = sum(es)
        for j in range(n_cols):
            y[i, j] = es[j] / s
    return y.view(x.shape)
