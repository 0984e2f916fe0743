"""Sum over the last dim in CUDA C++, any leading dims; fp32 accumulation, the result in the
input dtype.

A group of G threads owns one row: a slice of a warp for narrow rows (many rows to a block), the
whole block for wide ones. The row is walked in 16-byte vectors from the 16-byte boundary at or
before its start, so every row moves whole 128-bit loads whatever its width or offset (only the
first and last vector are masked). Each thread has ITEMS loads in flight per step. The thread's
sums, then the shuffle tree (and one shared-memory step across warps) add in a fixed order, so
the result is bitwise deterministic.
"""

import torch

from autokernel.cuda_build import load

KERNEL_TYPE = "reduce"
BACKEND = "cuda"
# Tunables; the builder passes each as a -D define, and kernel_fn reads them for the launch.
# ITEMS: 16-byte loads a thread has in flight per step; MAX_THREADS: most threads on one row;
# NARROW_BLOCK: block size when a row needs a warp or less.
CONFIG = {"ITEMS": 8, "MAX_THREADS": 512, "NARROW_BLOCK": 256}
SEARCH_SPACE = {
    "ITEMS": [2, 4, 6, 8],
    "MAX_THREADS": [128, 256, 512, 1024],
    "NARROW_BLOCK": [64, 128, 256, 512],
}

CUDA_SOURCE = r"""
#include <cuda_fp16.h>
#include <cuda_bf16.h>

// The larger of the two block sizes kernel_fn launches, and room for 1024 / BOUND blocks: a cap
// of 64 registers a thread (the 64K-register file over 1024 threads), so at least 1024 threads
// of loads are in flight on an SM.
#define BOUND (MAX_THREADS > NARROW_BLOCK ? MAX_THREADS : NARROW_BLOCK)
#define MIN_BLOCKS (1024 / BOUND)

// One 16-byte vector of T as VEC floats, and back. The 16 bytes travel as a uint4, so every
// load and store is a single 128-bit instruction (LDG.E.128 / STG.E.128 in SASS; a struct of
// eight __nv_bfloat16 filled element by element compiled to eight 2-byte stores in one
// kernel). at(w, q): element q of the words w[0..7] (two vectors).
template <typename T> struct Cvt;
template <> struct Cvt<float> {
  static constexpr int VEC = 4;
  static __device__ __forceinline__ float at(const unsigned* w, int q) {
    return __uint_as_float(w[q]);
  }
  static __device__ __forceinline__ uint4 pack(const float* f) {
    return make_uint4(__float_as_uint(f[0]), __float_as_uint(f[1]), __float_as_uint(f[2]),
                      __float_as_uint(f[3]));
  }
  static __device__ __forceinline__ float from(float v) { return v; }
};
template <> struct Cvt<__nv_bfloat16> {
  static constexpr int VEC = 8;
  static __device__ __forceinline__ float at(const unsigned* w, int q) {
    return __uint_as_float(q % 2 ? w[q / 2] & 0xffff0000u : w[q / 2] << 16);
  }
  static __device__ __forceinline__ unsigned two(float a, float b) {
    const __nv_bfloat162 h = __floats2bfloat162_rn(a, b);  // a in the low half
    return *reinterpret_cast<const unsigned*>(&h);
  }
  static __device__ __forceinline__ uint4 pack(const float* f) {
    return make_uint4(two(f[0], f[1]), two(f[2], f[3]), two(f[4], f[5]), two(f[6], f[7]));
  }
  static __device__ __forceinline__ __nv_bfloat16 from(float v) { return __float2bfloat16_rn(v); }
};
template <> struct Cvt<__half> {
  static constexpr int VEC = 8;
  static __device__ __forceinline__ float at(const unsigned* w, int q) {
    const unsigned bits = q % 2 ? w[q / 2] >> 16 : w[q / 2] & 0xffffu;
    return __half2float(__ushort_as_half((unsigned short)bits));
  }
  static __device__ __forceinline__ unsigned two(float a, float b) {
    const __half2 h = __floats2half2_rn(a, b);  // a in the low half
    return *reinterpret_cast<const unsigned*>(&h);
  }
  static __device__ __forceinline__ uint4 pack(const float* f) {
    return make_uint4(two(f[0], f[1]), two(f[2], f[3]), two(f[4], f[5]), two(f[6], f[7]));
  }
  static __device__ __forceinline__ __half from(float v) { return __float2half_rn(v); }
};

template <typename T>
__device__ __forceinline__ void unpack(const uint4& r, float* f) {
  const unsigned w[4] = {r.x, r.y, r.z, r.w};
#pragma unroll
  for (int j = 0; j < Cvt<T>::VEC; ++j) f[j] = Cvt<T>::at(w, j);
}

// Sum over a group of g lanes (g a power of two up to 32, aligned within the warp). Every lane
// of the warp takes part, rows past the end included, so the full mask holds.
__device__ __forceinline__ float group_sum(float v, int g) {
  for (int off = g >> 1; off > 0; off >>= 1) v += __shfl_xor_sync(0xffffffffu, v, off);
  return v;
}

// Sum over the whole block (blockDim a multiple of 32); every thread gets the same total.
__device__ __forceinline__ float block_sum(float v, float* red) {
  v = group_sum(v, 32);
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  __syncthreads();  // red may still be read by an earlier reduction
  if (lane == 0) red[warp] = v;
  __syncthreads();
  v = lane < (int)(blockDim.x >> 5) ? red[lane] : 0.f;
  return group_sum(v, 32);
}

// Sum of the elements of vector k that lie in the row (columns k * VEC - mis + j).
template <typename T>
__device__ __forceinline__ float vec_sum(const uint4& v, int k, int mis, int cols) {
  constexpr int VEC = Cvt<T>::VEC;
  float f[VEC];
  unpack<T>(v, f);
  const int e0 = k * VEC - mis;
  float s = 0.f;
  if (e0 >= 0 && e0 + VEC <= cols) {
#pragma unroll
    for (int j = 0; j < VEC; ++j) s += f[j];
  } else {
#pragma unroll
    for (int j = 0; j < VEC; ++j) s += (e0 + j >= 0 && e0 + j < cols) ? f[j] : 0.f;
  }
  return s;
}

template <typename T>
__device__ __forceinline__ void reduce_rows(const T* __restrict__ x, T* __restrict__ y,
                                            long long rows, int cols, long long xs, int g) {
  constexpr int VEC = Cvt<T>::VEC;
  __shared__ float red[32];
  const long long row = (long long)blockIdx.x * (blockDim.x / g) + threadIdx.x / g;
  const int t = threadIdx.x % g;
  const bool valid = row < rows;
  const T* xr = x + (valid ? row : 0) * xs;
  // Any row start: the walk begins at the 16-byte boundary at or before it.
  const int mis = (int)(((unsigned long long)xr % 16) / sizeof(T));
  const uint4* xv = reinterpret_cast<const uint4*>(xr - mis);
  const int nvec = valid ? (cols + mis + VEC - 1) / VEC : 0;
  float s = 0.f;
  // ITEMS independent 16-byte loads in flight per thread per step, then summed in a fixed order.
  for (int k0 = t; k0 < nvec; k0 += ITEMS * g) {
    uint4 p[ITEMS];
#pragma unroll
    for (int i = 0; i < ITEMS; ++i) {
      const int k = k0 + i * g;
      if (k < nvec) p[i] = __ldg(xv + k);
    }
#pragma unroll
    for (int i = 0; i < ITEMS; ++i) {
      const int k = k0 + i * g;
      if (k < nvec) s += vec_sum<T>(p[i], k, mis, cols);
    }
  }
  const float total = g <= 32 ? group_sum(s, g) : block_sum(s, red);
  if (valid && t == 0) y[row] = Cvt<T>::from(total);
}

// Entry points (parameter lists written out: the launcher reads them unpreprocessed).
extern "C" __global__ void __launch_bounds__(BOUND, MIN_BLOCKS) reduce_f16(
    const __half* x, __half* y, long long rows, int cols, long long xs, int g) {
  reduce_rows<__half>(x, y, rows, cols, xs, g);
}
extern "C" __global__ void __launch_bounds__(BOUND, MIN_BLOCKS) reduce_bf16(
    const __nv_bfloat16* x, __nv_bfloat16* y, long long rows, int cols, long long xs, int g) {
  reduce_rows<__nv_bfloat16>(x, y, rows, cols, xs, g);
}
extern "C" __global__ void __launch_bounds__(BOUND, MIN_BLOCKS) reduce_f32(
    const float* x, float* y, long long rows, int cols, long long xs, int g) {
  reduce_rows<float>(x, y, rows, cols, xs, g);
}
"""

_MOD = load(CUDA_SOURCE, CONFIG)
_KERNELS = {
    torch.float16: _MOD.reduce_f16,
    torch.bfloat16: _MOD.reduce_bf16,
    torch.float32: _MOD.reduce_f32,
}
_PLANS: dict = {}  # launch plans by call signature; emptied when full
MAX_PLANS = 1024
MAX_COLS = 2**31 - 64  # in-row indices are 32-bit in the kernel


def kernel_fn(x: torch.Tensor) -> torch.Tensor:
    cols = x.shape[-1]
    out = torch.empty(x.shape[:-1], dtype=x.dtype, device=x.device)
    if out.numel() == 0:
        return out
    if cols == 0:
        return out.fill_(0)
    if cols > MAX_COLS:
        raise ValueError(f"rows of {cols} elements: at most {MAX_COLS}")
    x2 = x.reshape(-1, cols)
    if x2.stride(-1) != 1:
        x2 = x2.contiguous()
    key = (x2.shape, x2.stride(0), x.dtype)
    plan = _PLANS.get(key)
    if plan is None:
        if len(_PLANS) >= MAX_PLANS:
            _PLANS.clear()
        plan = _PLANS[key] = rows_plan(x2.shape[0], cols, x2.element_size(), CONFIG)
    grid, block, g = plan
    _KERNELS[x.dtype](grid, block, x2, out, x2.shape[0], cols, x2.stride(0), g)
    return out


def rows_plan(rows: int, cols: int, size: int, config: dict) -> tuple[int, int, int]:
    """(grid, block, threads per row g): enough threads that one step of ITEMS vectors each
    covers the row (one vector more for a row that may start inside a vector), a power of two
    up to MAX_THREADS. Past 32 a row takes the whole block; below, NARROW_BLOCK // g rows share
    a block."""
    vec = 16 // size
    nvec = -(-cols // vec) + 1
    g = min(_pow2(-(-nvec // config["ITEMS"])), config["MAX_THREADS"])
    if g > 32:
        block = g
    else:  # several rows per block, a block no larger than the rows need
        block = max(32, min(config["NARROW_BLOCK"], 32 * _pow2(-(-rows * g // 32))))
    return -(-rows // (block // g)), block, g


def _pow2(n: int) -> int:
    return 1 << (n - 1).bit_length() if n > 1 else 1
