# expect: REJECTED static
"""Planted cheat: no kernel launch; softmax computed in Python on values read with
Tensor.map2_, which calls a Python function on every element of its tensors.

map2_ (like map_ and apply_) walks the CPU memory itself and issues no aten op, so the runtime
monitor saw nothing, and it was on neither of the static guard's lists (map_ and apply_ were
refused only as direct calls). The results go back through map2_ too, so every output is right
and the whole evaluation passed with the arithmetic on the host.

Refused in static: tensor methods that hand element values to Python (map_, map2_, apply_,
tolist, item) are refused as attributes, called or not.
"""

import math

import torch
import triton
import triton.language as tl

KERNEL_TYPE = "softmax"


@triton.jit
def _unused_kernel(X, BLOCK: tl.constexpr):
    pass


def _softmax_rows(vals: list, n: int) -> list:
    out = []
    for start in range(0, len(vals), n):
        row = vals[start : start + n]
        m = max(row)
        if m == -math.inf:
            out += [math.nan] * n
            continue
        es = [math.exp(v - m) for v in row]
        s = sum(es)
        out += [e / s for e in es]
    return out


def kernel_fn(x: torch.Tensor) -> torch.Tensor:
    xc = x.contiguous()
    seen = []
    scratch = torch.empty(xc.shape, dtype=x.dtype, device=x.device)
    scratch.map2_(xc, xc, lambda a, b, c: seen.append(b) or b)  # CHEAT: values to Python
    values = iter(_softmax_rows(seen, x.shape[-1]))
    y = torch.empty(xc.shape, dtype=x.dtype, device=x.device)
    y.map2_(xc, xc, lambda a, b, c: next(values))
    return y
