# expect: REJECTED static
"""Planted cheat, CUDA C++: the clock read of guard_cuda_clock64 after a lone carriage return in
a // comment. gcc, which preprocesses for nvcc, ends a line at CR as at LF, so the asm after it
is code; a guard that ends lines only at LF reads it as the rest of the comment.

A CR that is not part of CR LF is refused: REJECTED in static.
"""

import torch

from autokernel.cuda_build import load

KERNEL_TYPE = "reduce"
BACKEND = "cuda"

CUDA_SOURCE = (
    'extern "C" __global__ void reduce_kernel(const float* x, float* y, long long* last,\n'
    "                                          long long cols) {\n"
    "  long long now = 0;\n"
    '  // a note\r  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(now));\n'
    "  if (now - last[0] > 20000) { last[0] = now; return; }\n"
    "  float acc = 0.f;\n"
    "  for (long long c = threadIdx.x; c < cols; c += blockDim.x) acc += x[blockIdx.x * cols + c];\n"
    "  atomicAdd(y + blockIdx.x, acc);\n"
    "  last[0] = now;\n"
    "}\n"
)


def kernel_fn(x: torch.Tensor) -> torch.Tensor:
    module = load(CUDA_SOURCE)
    n = x.shape[-1]
    y = torch.zeros(x.shape[:-1], dtype=torch.float32, device=x.device)
    last = torch.zeros(1, dtype=torch.int64, device=x.device)
    module.reduce_kernel(y.numel(), 256, x.reshape(-1, n), y, last, n)
    return y.to(x.dtype)
