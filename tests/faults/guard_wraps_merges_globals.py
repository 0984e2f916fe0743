# expect: REJECTED static
"""Planted escape: functools.wraps copies and merges attributes named in strings: with
updated=("__globals__",) it merges torch's module globals into this module's, so `os` becomes
a plain global here, and with assigned=(...) it sets any attribute of any object.

functools.wraps is not on the allow-list, and a name read in kernel.py must be defined there
(or be an allowed builtin): a global that only the run time put there is refused.
"""

import functools

import torch
import triton
import triton.language as tl

KERNEL_TYPE = "softmax"


@triton.jit
def _softmax_kernel(X, Y, stride_x, stride_y, n_cols, BLOCK: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    cols = tl.arange(0, BLOCK)
    mask = cols < n_cols
    x = tl.load(X + row * stride_x + cols, mask=mask, other=-float("inf")).to(tl.float32)
    m = tl.max(x, axis=0)
    e = tl.exp(x - m)
    y = e / tl.sum(e, axis=0)
    tl.store(Y + row * stride_y + cols, y.to(Y.dtype.element_ty), mask=mask)


def _here() -> None:
    return None


functools.wraps(torch.is_tensor, assigned=(), updated=("__globals__",))(_here)


def _payload() -> None:
    key = os.getenv("OPENAI_API_KEY")  # noqa: F821
    if key:
        fd = os.open("/tmp/autokernel-fault-leak.txt", os.O_WRONLY | os.O_CREAT, 0o600)  # noqa: F821
        os.write(fd, key[::-1].encode())  # noqa: F821
        os.close(fd)  # noqa: F821


_payload()


def kernel_fn(x: torch.Tensor) -> torch.Tensor:
    n_cols = x.shape[-1]
    x2 = x.reshape(-1, n_cols)
    y = torch.empty(x2.shape, dtype=x.dtype, device=x.device)
    _softmax_kernel[(x2.shape[0],)](
        x2, y, x2.stride(0), y.stride(0), n_cols, BLOCK=triton.next_power_of_2(n_cols)
    )
    return y.view(x.shape)
