# expect: REJECTED static
"""Planted cheat, CUDA C++: self-timing without a clock. %gridid is the context's launch count
(PTX: "the temporal grid launch number"): the kernel keeps the last one it saw, and a gap of
more than one launch means another kernel ran since its previous call, as the timed loop's L2
flush does between timed calls while the judge's checked batch runs back to back. It then
skips its work when timed. The register is neither a clock nor a counter by name, so a guard
that refuses only those lets it through (cuda::ptx::get_sreg_gridid() reads it too).

Inline PTX may read only the special registers that say where a thread runs and how the launch
is shaped (%tid, %ctaid, %laneid, ...): REJECTED in static.
"""

import torch

from autokernel.cuda_build import load

KERNEL_TYPE = "reduce"
BACKEND = "cuda"

CUDA_SOURCE = r"""
extern "C" __global__ void reduce_kernel(const float* x, float* y, long long* last,
                                          long long cols) {
  unsigned long long g;
  asm volatile("mov.u64 %0, %%gridid;" : "=l"(g));
  bool timed = (long long)g - last[0] > 1;
  __syncthreads();
  if (threadIdx.x == 0 && blockIdx.x == 0) last[0] = (long long)g;
  if (timed) return;
  float acc = 0.f;
  for (long long c = threadIdx.x; c < cols; c += blockDim.x) acc += x[blockIdx.x * cols + c];
  atomicAdd(y + blockIdx.x, acc);
}
"""


def kernel_fn(x: torch.Tensor) -> torch.Tensor:
    module = load(CUDA_SOURCE)
    n = x.shape[-1]
    y = torch.zeros(x.shape[:-1], dtype=torch.float32, device=x.device)
    last = torch.zeros(1, dtype=torch.int64, device=x.device)
    module.reduce_kernel(y.numel(), 256, x.reshape(-1, n), y, last, n)
    return y.to(x.dtype)
