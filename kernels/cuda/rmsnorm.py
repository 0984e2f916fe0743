"""RMSNorm in CUDA C++: y = x * rsqrt(mean(x^2) + eps) * weight over the last dim, any leading
dims flattened to rows; statistics in fp32, one cast when storing.

A group of G threads owns one row (G a power of two: a slice of a warp for narrow rows, many
rows to a block; the whole block for wide ones). Each thread walks its row in 16-byte vectors
from the aligned address at or before the row start, so odd widths (50257) still move whole
vectors and only the first and last vector of a row are masked. The first ITEMS vectors of each
thread stay in registers between the sum of squares and the scaling: a row of up to
G * ITEMS vectors is read once (one pass); wider rows read the rest again.
Sums are warp shuffles (and one shared-memory step across warps), in a fixed order, so the
result is bitwise deterministic. Views whose rows sit at other 16-byte offsets than the output's
take the scalar instantiation (VEC = 1) of the same code.
"""

import torch

from autokernel.cuda_build import load

KERNEL_TYPE = "rmsnorm"
BACKEND = "cuda"
# Tunables; the builder passes each as a -D define, and kernel_fn reads them for the launch.
# ITEMS: 16-byte vectors a thread keeps in registers (row cached on chip up to G * ITEMS);
# MAX_THREADS: most threads on one row; NARROW_BLOCK: block size when a row needs a warp or less.
CONFIG = {"ITEMS": 4, "MAX_THREADS": 1024, "NARROW_BLOCK": 256}
SEARCH_SPACE = {
    "ITEMS": [1, 2, 4, 8, 16],
    "MAX_THREADS": [128, 256, 512, 1024],
    "NARROW_BLOCK": [64, 128, 256, 512, 1024],
}

CUDA_SOURCE = r"""
#include <cuda_fp16.h>
#include <cuda_bf16.h>

#define BOUND (MAX_THREADS > NARROW_BLOCK ? MAX_THREADS : NARROW_BLOCK)

template <typename T> __device__ __forceinline__ float to_f(T v) { return (float)v; }
template <> __device__ __forceinline__ float to_f<__half>(__half v) { return __half2float(v); }
template <> __device__ __forceinline__ float to_f<__nv_bfloat16>(__nv_bfloat16 v) {
  return __bfloat162float(v);
}
template <typename T> __device__ __forceinline__ T from_f(float v) { return (T)v; }
template <> __device__ __forceinline__ __half from_f<__half>(float v) { return __float2half_rn(v); }
template <> __device__ __forceinline__ __nv_bfloat16 from_f<__nv_bfloat16>(float v) {
  return __float2bfloat16_rn(v);
}

template <typename T, int N> struct alignas(sizeof(T) * N) Pack { T v[N]; };

// Sum over a group of g lanes (g a power of two up to 32, aligned within the warp). Every lane
// of the warp must take part: callers finish their row's work before returning.
__device__ __forceinline__ float group_sum(float v, int g) {
  for (int off = g >> 1; off > 0; off >>= 1) v += __shfl_xor_sync(0xffffffffu, v, off);
  return v;
}

// Sum over the whole block (blockDim a multiple of 32); every thread gets the total.
__device__ __forceinline__ float block_sum(float v, float* red) {
  v = group_sum(v, 32);
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  if (lane == 0) red[warp] = v;
  __syncthreads();
  v = lane < (int)(blockDim.x >> 5) ? red[lane] : 0.f;
  return group_sum(v, 32);
}

template <typename T, int VEC>
__device__ __forceinline__ void rmsnorm_rows(
    const T* __restrict__ x, const T* __restrict__ w, T* __restrict__ y, long long rows,
    long long cols, long long xs, long long ys, float eps, int g, int w_vec) {
  __shared__ float red[32];
  const long long row = (long long)blockIdx.x * (blockDim.x / g) + threadIdx.x / g;
  const int t = threadIdx.x % g;
  const bool valid = row < rows;
  const T* xr = x + (valid ? row : 0) * xs;
  T* yr = y + (valid ? row : 0) * ys;
  // Elements of the row's first vector that lie before the row (0 when the row is aligned).
  const int mis = VEC == 1 ? 0 : (int)(((unsigned long long)xr % 16) / sizeof(T));
  const T* xa = xr - mis;
  T* ya = yr - mis;
  const long long nvec = (cols + mis + VEC - 1) / VEC;
  // Sum of squares of one vector's elements that belong to the row.
  auto absorb = [&](long long k, const Pack<T, VEC>& p, float& acc) {
    const long long e0 = k * VEC - mis;
#pragma unroll
    for (int j = 0; j < VEC; ++j) {
      const float f = to_f(p.v[j]);
      if (e0 + j >= 0 && e0 + j < cols) acc += f * f;
    }
  };
  // Scale one vector and store its elements that belong to the row (whole when inside it).
  auto emit = [&](long long k, const Pack<T, VEC>& p, float rstd) {
    const long long e0 = k * VEC - mis;
    if (e0 >= 0 && e0 + VEC <= cols) {
      Pack<T, VEC> o;
      if (VEC > 1 && mis == 0 && w_vec) {
        const Pack<T, VEC> wv = *reinterpret_cast<const Pack<T, VEC>*>(w + e0);
#pragma unroll
        for (int j = 0; j < VEC; ++j) o.v[j] = from_f<T>(to_f(p.v[j]) * rstd * to_f(wv.v[j]));
      } else {
#pragma unroll
        for (int j = 0; j < VEC; ++j) o.v[j] = from_f<T>(to_f(p.v[j]) * rstd * to_f(w[e0 + j]));
      }
      *reinterpret_cast<Pack<T, VEC>*>(ya + k * VEC) = o;
    } else {
#pragma unroll
      for (int j = 0; j < VEC; ++j) {
        const long long e = e0 + j;
        if (e >= 0 && e < cols) yr[e] = from_f<T>(to_f(p.v[j]) * rstd * to_f(w[e]));
      }
    }
  };
  Pack<T, VEC> cache[ITEMS];
  float acc = 0.f;
  if (valid) {
#pragma unroll
    for (int i = 0; i < ITEMS; ++i) {
      const long long k = t + (long long)i * g;
      if (k < nvec) cache[i] = *reinterpret_cast<const Pack<T, VEC>*>(xa + k * VEC);
    }
#pragma unroll
    for (int i = 0; i < ITEMS; ++i) {
      const long long k = t + (long long)i * g;
      if (k < nvec) absorb(k, cache[i], acc);
    }
    for (long long k = t + (long long)ITEMS * g; k < nvec; k += g)
      absorb(k, *reinterpret_cast<const Pack<T, VEC>*>(xa + k * VEC), acc);
  }
  const float total = g <= 32 ? group_sum(acc, g) : block_sum(acc, red);
  const float rstd = rsqrtf(total / (float)cols + eps);
  if (!valid) return;
#pragma unroll
  for (int i = 0; i < ITEMS; ++i) {
    const long long k = t + (long long)i * g;
    if (k < nvec) emit(k, cache[i], rstd);
  }
  for (long long k = t + (long long)ITEMS * g; k < nvec; k += g)
    emit(k, *reinterpret_cast<const Pack<T, VEC>*>(xa + k * VEC), rstd);
}

// Entry points (parameter lists written out: the launcher reads them unpreprocessed).
extern "C" __global__ void __launch_bounds__(BOUND) rmsnorm_f16(
    const __half* x, const __half* w, __half* y, long long rows, long long cols, long long xs,
    long long ys, float eps, int g, int w_vec) {
  rmsnorm_rows<__half, 8>(x, w, y, rows, cols, xs, ys, eps, g, w_vec);
}
extern "C" __global__ void __launch_bounds__(BOUND) rmsnorm_bf16(
    const __nv_bfloat16* x, const __nv_bfloat16* w, __nv_bfloat16* y, long long rows,
    long long cols, long long xs, long long ys, float eps, int g, int w_vec) {
  rmsnorm_rows<__nv_bfloat16, 8>(x, w, y, rows, cols, xs, ys, eps, g, w_vec);
}
extern "C" __global__ void __launch_bounds__(BOUND) rmsnorm_f32(
    const float* x, const float* w, float* y, long long rows, long long cols, long long xs,
    long long ys, float eps, int g, int w_vec) {
  rmsnorm_rows<float, 4>(x, w, y, rows, cols, xs, ys, eps, g, w_vec);
}
extern "C" __global__ void __launch_bounds__(BOUND) rmsnorm_f16_scalar(
    const __half* x, const __half* w, __half* y, long long rows, long long cols, long long xs,
    long long ys, float eps, int g, int w_vec) {
  rmsnorm_rows<__half, 1>(x, w, y, rows, cols, xs, ys, eps, g, w_vec);
}
extern "C" __global__ void __launch_bounds__(BOUND) rmsnorm_bf16_scalar(
    const __nv_bfloat16* x, const __nv_bfloat16* w, __nv_bfloat16* y, long long rows,
    long long cols, long long xs, long long ys, float eps, int g, int w_vec) {
  rmsnorm_rows<__nv_bfloat16, 1>(x, w, y, rows, cols, xs, ys, eps, g, w_vec);
}
extern "C" __global__ void __launch_bounds__(BOUND) rmsnorm_f32_scalar(
    const float* x, const float* w, float* y, long long rows, long long cols, long long xs,
    long long ys, float eps, int g, int w_vec) {
  rmsnorm_rows<float, 1>(x, w, y, rows, cols, xs, ys, eps, g, w_vec);
}
"""

_MOD = load(CUDA_SOURCE, CONFIG)
# (dtype, rows at x's and y's 16-byte offsets alike) -> kernel: vectors, else scalars
_KERNELS = {
    (torch.float16, True): _MOD.rmsnorm_f16,
    (torch.bfloat16, True): _MOD.rmsnorm_bf16,
    (torch.float32, True): _MOD.rmsnorm_f32,
    (torch.float16, False): _MOD.rmsnorm_f16_scalar,
    (torch.bfloat16, False): _MOD.rmsnorm_bf16_scalar,
    (torch.float32, False): _MOD.rmsnorm_f32_scalar,
}
_PLANS: dict = {}  # launch plans by call signature; emptied when full
MAX_PLANS = 1024


def kernel_fn(x: torch.Tensor, weight: torch.Tensor, eps: float = 1e-6) -> torch.Tensor:
    cols = x.shape[-1]
    out = torch.empty(x.shape, dtype=x.dtype, device=x.device)
    if x.numel() == 0:
        return out
    x2 = x.reshape(-1, cols)
    if x2.stride(-1) != 1:
        x2 = x2.contiguous()
    w = weight if weight.is_contiguous() else weight.contiguous()
    y2 = out.view(-1, cols)
    key = (x2.shape, x2.stride(0), x.dtype, x2.data_ptr() % 16, w.data_ptr() % 16)
    plan = _PLANS.get(key)
    if plan is None:
        if len(_PLANS) >= MAX_PLANS:
            _PLANS.clear()
        plan = _PLANS[key] = _plan(x2, w, y2)
    kernel, grid, block, g, w_vec = plan
    kernel(grid, block, x2, w, y2, x2.shape[0], cols, x2.stride(0), cols, float(eps), g, w_vec)
    return out


def _plan(x2: torch.Tensor, w: torch.Tensor, y2: torch.Tensor) -> tuple:
    """(kernel, grid, block, threads per row, vector weight loads) for this signature."""
    size = x2.element_size()
    # The vector walk needs x's and y's rows at the same offset from a 16-byte boundary.
    same = x2.data_ptr() % 16 == y2.data_ptr() % 16
    same = same and (x2.stride(0) - y2.stride(0)) * size % 16 == 0
    vec = 16 // size if same else 1
    rows, cols = x2.shape
    nvec = -(-(cols + vec - 1) // vec)
    g = min(_pow2(-(-nvec // CONFIG["ITEMS"])), CONFIG["MAX_THREADS"])
    if g > 32:  # a row per block: the sum crosses warps through shared memory
        block = g
    else:  # several rows per block, a block no larger than the rows need
        block = max(32, min(CONFIG["NARROW_BLOCK"], 32 * _pow2(-(-rows * g // 32))))
    grid = -(-rows // (block // g))
    return _KERNELS[(x2.dtype, same)], grid, block, g, int(w.data_ptr() % 16 == 0)


def _pow2(n: int) -> int:
    return 1 << (n - 1).bit_length() if n > 1 else 1
