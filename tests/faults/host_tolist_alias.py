# expect: REJECTED static
"""Planted cheat: no kernel launch; softmax computed in Python on values read with .tolist(),
taken as a bound method first so that no call of `.tolist()` appears in the source.

tolist copies elements into Python floats without any aten op (the runtime monitor saw none),
and the static guard refused only the call `x.tolist()`, not `read = x.tolist; read()`. The
results are written back element by element (`y[i] = v`: select and fill_, both allowed), so
every output is right and the evaluation passed with the arithmetic on the host.

Refused in static: .tolist is refused as an attribute, called or not.
"""

import math

import torch
import triton
import triton.language as tl

KERNEL_TYPE = "softmax"


@triton.jit
def _unused_kernel(X, BLOCK: tl.constexpr):
    pass


def kernel_fn(x: torch.Tensor) -> torch.Tensor:
    n = x.shape[-1]
    x2 = x.reshape(-1, n)
    read = x2.tolist  # CHEAT: a bound method, so no `.tolist()` call is written
    rows = read()
    y = torch.empty(x2.shape, dtype=x.dtype, device=x.device)
    for i, row in enumerate(rows):
        m = max(row)
        if m == -math.inf:
            for j in range(n):
                y[i, j] = math.nan
            continue
        es = [math.exp(v - m) for v in row]
        s = sum(es)
        for j in range(n):
            y[i, j] = es[j] / s
    return y.view(x.shape)
