# expect: REJECTED static
"""Planted escape: a storage without .storage or .untyped_storage. Tensor.storage_type()
returns the legacy storage class (torch.FloatStorage), which builds a storage from a size, and
a storage's .type("a.b") imports the module its string names and calls what it finds with the
storage's size: any module on the worker's import path runs (the fault corpus's own
forgeries among them), and any importable function can be called with an int
(os.close, signal.alarm, faulthandler.dump_traceback_later), none of it read by the guard.

.storage_type is refused like .storage: REJECTED in static.
"""

import torch
import triton
import triton.language as tl

KERNEL_TYPE = "softmax"

try:
    storage_class = torch.empty(1).storage_type()  # torch.FloatStorage: no name refused
    storage_class(1).type("tests.faults.forge_tensor_method_rebind")
except Exception:
    pass  # it imported the module, then failed: the import was the point


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
