"""Sum over the last dim in CUDA C++, any leading dims; fp32 accumulation, the result in the
input dtype.

A group of G threads owns one row (a slice of a warp for narrow rows, many rows to a block;
the whole block for wide ones) and walks it in 16-byte vectors from the aligned address at or
before the row start, so every row loads whole vectors whatever its width (only the two end
vectors are masked). ITEMS loads are in flight per thread per step. The thread sums, then the
shuffle tree (and one shared-memory step across warps) always add in the same order, so the
result is bitwise deterministic.
"""

import torch

from autokernel.cuda_build import load

KERNEL_TYPE = "reduce"
BACKEND = "cuda"
# Tunables; the builder passes each as a -D define, and kernel_fn reads them for the launch.
# ITEMS: 16-byte vectors a thread holds (in registers across the passes, or in flight);
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

// One row walked in VEC-element vectors from the 16-byte boundary at or before its start:
// vector k holds columns first(k) .. first(k) + VEC - 1, some of them outside the row at the
// two ends (never outside the 16-byte blocks the row touches, so the loads cannot fault).
template <typename T, int VEC> struct Row {
  const T* xa;
  long long cols, nvec;
  int mis;
  __device__ __forceinline__ Row(const T* xr, long long n) : cols(n) {
    mis = VEC == 1 ? 0 : (int)(((unsigned long long)xr % 16) / sizeof(T));
    xa = xr - mis;
    nvec = (cols + mis + VEC - 1) / VEC;
  }
  __device__ __forceinline__ Pack<T, VEC> load(long long k) const {
    return *reinterpret_cast<const Pack<T, VEC>*>(xa + k * VEC);
  }
  __device__ __forceinline__ long long first(long long k) const { return k * VEC - mis; }
  __device__ __forceinline__ bool whole(long long k) const {
    return first(k) >= 0 && first(k) + VEC <= cols;
  }
};

// Sum over a group of g lanes (g a power of two up to 32, aligned within the warp). Every lane
// of the warp must take part: callers finish their row's work before returning.
__device__ __forceinline__ float group_sum(float v, int g) {
  for (int off = g >> 1; off > 0; off >>= 1) v += __shfl_xor_sync(0xffffffffu, v, off);
  return v;
}

// Sum over the whole block (blockDim a multiple of 32); every thread gets the same total.
__device__ __forceinline__ float block_sum(float v, float* red) {
  v = group_sum(v, 32);
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  __syncthreads();  // red may still be read by a previous call
  if (lane == 0) red[warp] = v;
  __syncthreads();
  v = lane < (int)(blockDim.x >> 5) ? red[lane] : 0.f;
  return group_sum(v, 32);
}

// The sum over the threads that share a row: g of them, a slice of a warp or the whole block.
__device__ __forceinline__ float row_sum(float v, int g, float* red) {
  return g <= 32 ? group_sum(v, g) : block_sum(v, red);
}

template <typename T, int VEC>
__device__ __forceinline__ void reduce_rows(const T* __restrict__ x, T* __restrict__ y,
                                            long long rows, long long cols, long long xs, int g) {
  __shared__ float red[32];
  const long long row = (long long)blockIdx.x * (blockDim.x / g) + threadIdx.x / g;
  const int t = threadIdx.x % g;
  const bool valid = row < rows;
  const Row<T, VEC> r(x + (valid ? row : 0) * xs, cols);
  float s = 0.f;
  if (valid) {
    // ITEMS independent loads in flight per step, then their sums in a fixed order.
    for (long long k0 = t; k0 < r.nvec; k0 += (long long)ITEMS * g) {
      Pack<T, VEC> p[ITEMS];
#pragma unroll
      for (int i = 0; i < ITEMS; ++i) {
        const long long k = k0 + (long long)i * g;
        if (k < r.nvec) p[i] = r.load(k);
      }
#pragma unroll
      for (int i = 0; i < ITEMS; ++i) {
        const long long k = k0 + (long long)i * g;
        if (k >= r.nvec) continue;
        if (r.whole(k)) {
#pragma unroll
          for (int j = 0; j < VEC; ++j) s += to_f(p[i].v[j]);
        } else {
#pragma unroll
          for (int j = 0; j < VEC; ++j) {
            const long long e = r.first(k) + j;
            if (e >= 0 && e < cols) s += to_f(p[i].v[j]);
          }
        }
      }
    }
  }
  const float total = row_sum(s, g, red);
  if (valid && t == 0) y[row] = from_f<T>(total);
}

extern "C" __global__ void __launch_bounds__(BOUND) reduce_f16(
    const __half* x, __half* y, long long rows, long long cols, long long xs, int g) {
  reduce_rows<__half, 8>(x, y, rows, cols, xs, g);
}
extern "C" __global__ void __launch_bounds__(BOUND) reduce_bf16(
    const __nv_bfloat16* x, __nv_bfloat16* y, long long rows, long long cols, long long xs,
    int g) {
  reduce_rows<__nv_bfloat16, 8>(x, y, rows, cols, xs, g);
}
extern "C" __global__ void __launch_bounds__(BOUND) reduce_f32(
    const float* x, float* y, long long rows, long long cols, long long xs, int g) {
  reduce_rows<float, 4>(x, y, rows, cols, xs, g);
}
"""

_MOD = load(CUDA_SOURCE, CONFIG)
# dtype -> kernel
_KERNELS = {
    torch.float16: _MOD.reduce_f16,
    torch.bfloat16: _MOD.reduce_bf16,
    torch.float32: _MOD.reduce_f32,
}
_PLANS: dict = {}  # launch plans by call signature; emptied when full
MAX_PLANS = 1024


def kernel_fn(x: torch.Tensor) -> torch.Tensor:
    cols = x.shape[-1]
    out = torch.empty(x.shape[:-1], dtype=x.dtype, device=x.device)
    if out.numel() == 0:
        return out
    if cols == 0:
        return out.fill_(0)
    x2 = x.reshape(-1, cols)
    if x2.stride(-1) != 1:
        x2 = x2.contiguous()
    key = (x2.shape, x2.stride(0), x.dtype)
    plan = _PLANS.get(key)
    if plan is None:
        if len(_PLANS) >= MAX_PLANS:
            _PLANS.clear()
        g, block, grid = _rows_plan(x2.shape[0], cols, 16 // x2.element_size())
        plan = _PLANS[key] = (_KERNELS[x.dtype], grid, block, g)
    kernel, grid, block, g = plan
    kernel(grid, block, x2, out, x2.shape[0], cols, x2.stride(0), g)
    return out


def _rows_plan(rows: int, cols: int, vec: int) -> tuple[int, int, int]:
    """(threads per row, block, grid): enough threads that each holds at most ITEMS vectors of
    its row, a power of two up to MAX_THREADS; several narrow rows share a block."""
    nvec = -(-(cols + vec - 1) // vec)
    g = min(_pow2(-(-nvec // CONFIG["ITEMS"])), CONFIG["MAX_THREADS"])
    if g > 32:  # a row per block: its sums cross warps through shared memory
        block = g
    else:  # several rows per block, a block no larger than the rows need
        block = max(32, min(CONFIG["NARROW_BLOCK"], 32 * _pow2(-(-rows * g // 32))))
    return g, block, -(-rows // (block // g))


def _pow2(n: int) -> int:
    return 1 << (n - 1).bit_length() if n > 1 else 1
