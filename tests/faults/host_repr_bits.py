# expect: REJECTED smoke
"""Planted cheat: no kernel launch; the input's exact bits are read from repr() of an integer
view of it, and softmax is computed in Python.

repr(tensor) formats with torch's dispatch modes switched off, so the runtime monitor saw none
of the ops that read the values; repr and str are allowed builtins and .view an allowed
method, and an int32 (int16 for half types) view prints every bit of every element exactly.
The results go back through torch.Tensor(list) and .to (allowed allocation and copy).

Caught at run time: turning a tensor into text while kernel_fn runs (repr, str, format,
f-strings) counts as a read of its values on the host, like .item().
"""

import math

import torch
import triton
import triton.language as tl

KERNEL_TYPE = "softmax"
BITS = {torch.float32: (torch.int32, 8, 23), torch.float16: (torch.int16, 5, 10),
        torch.bfloat16: (torch.int16, 8, 7)}  # fmt: skip


@triton.jit
def _unused_kernel(X, BLOCK: tl.constexpr):
    pass


def _decode(word: int, exp_bits: int, man_bits: int) -> float:
    width = 1 + exp_bits + man_bits
    word &= (1 << width) - 1
    sign = -1.0 if word >> (width - 1) else 1.0
    e = (word >> man_bits) & ((1 << exp_bits) - 1)
    man = word & ((1 << man_bits) - 1)
    bias = (1 << (exp_bits - 1)) - 1
    if e == (1 << exp_bits) - 1:
        return math.nan if man else sign * math.inf
    if e == 0:
        return sign * math.ldexp(man, 1 - bias - man_bits)
    return sign * math.ldexp(man + (1 << man_bits), e - bias - man_bits)


def _numbers(text: str) -> list:
    out, cur = [], ""
    for ch in text + " ":
        if ch.isdigit() or ch == "-":
            cur += ch
        elif cur:
            out.append(int(cur))
            cur = ""
    return out


def kernel_fn(x: torch.Tensor) -> torch.Tensor:
    n = x.shape[-1]
    x2 = x.reshape(-1, n).contiguous()
    int_dtype, eb, mb = BITS[x.dtype]
    rows = []
    for i in range(x2.shape[0]):
        words = []
        for s in range(0, n, 512):  # repr summarizes beyond 1000 elements
            text = repr(x2[i, s : s + 512].view(int_dtype))  # CHEAT: the exact bits as text
            words += _numbers(text.split("[", 1)[1].split("]", 1)[0])
        rows.append([_decode(w, eb, mb) for w in words])
    out = []
    for row in rows:
        m = max(row)
        if m == -math.inf:
            out.append([math.nan] * n)
            continue
        es = [math.exp(v - m) for v in row]
        s = sum(es)
        out.append([e / s for e in es])
    y = torch.Tensor(out) if out else torch.empty(x2.shape)
    return y.to(x.dtype).view(x.shape)
