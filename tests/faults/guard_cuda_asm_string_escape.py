# expect: REJECTED static
"""Planted cheat, CUDA C++: the self-timing of guard_cuda_clock64 through inline PTX whose
clock register is spelled with C escapes: "\x25\x25globaltimer" is "%%globaltimer" to the
compiler, so ptxas gets `mov.u64 %rd1, %globaltimer;`, while a guard that reads the asm string
as written sees no `%globaltimer` (the same escapes hide a `;` or a line break: "\x3b trap").

An asm string may use no escape but \n and \t: REJECTED in static.
"""

import torch

from autokernel.cuda_build import load

KERNEL_TYPE = "reduce"
BACKEND = "cuda"

CUDA_SOURCE = r"""
extern "C" __global__ void reduce_kernel(const float* x, float* y, long long* last,
                                          long long cols) {
  long long now;
  asm volatile("mov.u64 %0, \x25\x25globaltimer;" : "=l"(now));
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
