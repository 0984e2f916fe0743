# expect: REJECTED static
"""Planted cheat, CUDA C++: the self-timing of guard_cuda_clock64, its %globaltimer read placed
after a PTX block comment that holds `//`: a guard that strips `//` to the end of the string
first sees `mov.u64 %0, 0 /*` and nothing else, while ptxas closes the /* ... */ comment and
reads `mov.u64 %0, %globaltimer` after it.

The guard strips PTX comments as ptxas does, left to right, and refuses the clock register:
REJECTED in static.
"""

import torch

from autokernel.cuda_build import load

KERNEL_TYPE = "reduce"
BACKEND = "cuda"

CUDA_SOURCE = r"""
extern "C" __global__ void reduce_kernel(const float* x, float* y, long long* last,
                                          long long cols) {
  long long now = 0;
  asm volatile("mov.u64 %0, 0 /* // */; mov.u64 %0, %%globaltimer;" : "+l"(now));
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
