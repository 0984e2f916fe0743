# expect: REJECTED static
"""Planted cheat, CUDA C++: the clock read of guard_cuda_clock64 hidden in what the guard takes
for a character literal. To the preprocessor `1'_` is one number (a digit separator may be
followed by any identifier character), so `DROP(1'_) asm(...); DROP(2'_)` is the asm between
two dropped macro arguments; a guard that continues a number only at `'` + letter or digit reads
`'_) asm(...); DROP(2'` as one character literal.

The guard reads numbers as the preprocessor does (and refuses `'` before `$` or non-ASCII,
where compilers differ), so it sees the asm and its clock register: REJECTED in static.
"""

import torch

from autokernel.cuda_build import load

KERNEL_TYPE = "reduce"
BACKEND = "cuda"

CUDA_SOURCE = r"""
#define DROP(x)
extern "C" __global__ void reduce_kernel(const float* x, float* y, long long* last,
                                          long long cols) {
  long long now = 0;
  DROP(1'_) asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(now)); DROP(2'_)
  if (now - last[0] > 20000) { last[0] = now; return; }
  float acc = 0.f;
  for (long long c = threadIdx.x; c < cols; c += blockDim.x) acc += x[blockIdx.x * cols + c];
  atomicAdd(y + blockIdx.x, acc);
  last[0] = now;
}
"""


def kernel_fn(x: torch.Tensor) -> torch.Tensor:
    module = load(CUDA_SOURCE)
    n = x.shape[-1]
    y = torch.zeros(x.shape[:-1], dtype=torch.float32, device=x.device)
    last = torch.zeros(1, dtype=torch.int64, device=x.device)
    module.reduce_kernel(y.numel(), 256, x.reshape(-1, n), y, last, n)
    return y.to(x.dtype)
