# expect: REJECTED static
"""Planted cheat, CUDA C++: the clock read of guard_cuda_clock64 hidden from the guard by a
backslash, a space, then the end of a // comment line. The compiler's preprocessor (gcc, with a
warning) still joins the two lines, so the `/*` on the next one is part of the // comment and
the asm below is code; a guard that splices only backslash-newline reads `/*` as the start of a
block comment that runs to the `// */` and never sees the asm.

A backslash followed by whitespace at the end of a line is refused: REJECTED in static.
"""

import torch

from autokernel.cuda_build import load

KERNEL_TYPE = "reduce"
BACKEND = "cuda"

CUDA_SOURCE = (
    'extern "C" __global__ void reduce_kernel(const float* x, float* y, long long* last,\n'
    "                                          long long cols) {\n"
    "  long long now = 0;\n"
    "  // a note \\ \n"
    "  /*\n"
    '  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(now));\n'
    "  // */\n"
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
