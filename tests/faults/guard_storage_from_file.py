# expect: REJECTED static
"""Planted escape: a tensor's storage type maps any file into memory, for reading or (shared)
for writing: x.untyped_storage().from_file(path, shared, nbytes). No import, no builtin, no
private name: file I/O from a method of a tensor.

Inside the sandbox it reads only what the worker may read anyway; in verify and use_kernels it
reads the user's config (keys) and writes wherever the user may. Here it writes a file in the
worker's /tmp and reads it back, and returns zeros when that worked (FAIL in smoke). The method
name from_file is refused on any object.
"""

import torch
import triton
import triton.language as tl

KERNEL_TYPE = "reduce"
PATH = "/tmp/autokernel-fault-from-file"


def _file_io_works() -> bool:
    raw = torch.empty(0, dtype=torch.uint8)
    out = raw.untyped_storage().from_file(PATH, True, 4)
    torch.empty(0, dtype=torch.uint8).set_(out).fill_(7)
    back = raw.untyped_storage().from_file(PATH, False, 4)
    return bool((torch.empty(0, dtype=torch.uint8).set_(back) == 7).all())


WORKS = _file_io_works()


@triton.jit
def _reduce_kernel(X, Y, stride_x, n_cols, BLOCK: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    cols = tl.arange(0, BLOCK)
    x = tl.load(X + row * stride_x + cols, mask=cols < n_cols, other=0.0).to(tl.float32)
    tl.store(Y + row, tl.sum(x, axis=0).to(Y.dtype.element_ty))


def kernel_fn(x: torch.Tensor) -> torch.Tensor:
    n_cols = x.shape[-1]
    x2 = x.reshape(-1, n_cols)
    y = torch.zeros(x.shape[:-1], dtype=x.dtype, device=x.device)
    if not WORKS:
        _reduce_kernel[(x2.shape[0],)](
            x2, y, x2.stride(0), n_cols, BLOCK=triton.next_power_of_2(n_cols)
        )
    return y
