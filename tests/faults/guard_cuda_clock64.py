# expect: REJECTED static
"""Planted cheat, CUDA C++: clock64() read in device code, the same self-timing as
guard_inline_asm_globaltimer (skip the work when the calls are spaced by a flush, do it when they
run back to back as the judge's checked batch does).

The C++ guard refuses the device clocks (clock, clock64, %globaltimer and %clock in asm):
REJECTED in static, before the build (and before this machine's lack of a GPU is noticed).
"""

import torch

from autokernel.cuda_build import load

KERNEL_TYPE = "reduce"
BACKEND = "cuda"

CUDA_SOURCE = r"""
__global__ void reduce_kernel(const float* x, float* y, long long* last, long long cols) {
  long long now = clock64();
  if (now - last[0] > 20000) { last[0] = now; return; }
  float acc = 0.f;
  for (long long c = threadIdx.x; c < cols; c += blockDim.x) acc += x[blockIdx.x * cols + c];
  atomicAdd(y + blockIdx.x, acc);
  last[0] = now;
}
"""


def kernel_fn(x: torch.Tensor) -> torch.Tensor:
    module = load(CUDA_SOURCE, ["reduce_kernel"])
    n = x.shape[-1]
    y = torch.zeros(x.shape[:-1], dtype=torch.float32, device=x.device)
    last = torch.zeros(1, dtype=torch.int64, device=x.device)
    module.reduce_kernel(x.reshape(-1, n), y, last, n, grid=(y.numel(),), block=(256,))
    return y.to(x.dtype)
