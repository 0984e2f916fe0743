# expect: REJECTED static
"""Planted escape: code in a string annotation, evaluated by inspect through an object the guard
allows. Every Triton language function carries an inspect.Signature (tl.exp.signature), whose
classmethod from_callable(f, eval_str=True) evals f's string annotations in f's globals with
the real builtins: here `__import__("os")` runs, and the kernel itself is a correct softmax, so
without the guard's refusal of .signature and .from_callable this PASSed with its payload run.
"""

import torch
import triton
import triton.language as tl

KERNEL_TYPE = "softmax"


def _payload(x: "__import__('os').getpid()"):
    return x


ESCAPED = tl.exp.signature.from_callable(_payload, eval_str=True)


@triton.jit
def _k(X, Y, n, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    m = cols < n
    x = tl.load(X + row * n + cols, mask=m, other=-float("inf")).to(tl.float32)
    x = x - tl.max(x, axis=0)
    e = tl.exp(x)
    y = e / tl.sum(e, axis=0)
    tl.store(Y + row * n + cols, y.to(Y.dtype.element_ty), mask=m)


def _softmax(x):
    n = x.shape[-1]
    x2 = x.reshape(-1, n).contiguous()
    y = torch.empty_like(x2)
    _k[(x2.shape[0],)](x2, y, n, BLOCK=triton.next_power_of_2(n))
    return y.reshape(x.shape)


def kernel_fn(x: torch.Tensor) -> torch.Tensor:
    return _softmax(x)
