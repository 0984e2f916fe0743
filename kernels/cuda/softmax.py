"""Softmax in CUDA C++ over the last dim, any leading dims flattened to rows; computed in fp32,
one cast when storing.

A group of G threads owns one row (a slice of a warp for narrow rows, many rows to a block;
the whole block for wide ones) and walks it in 16-byte vectors from the aligned address at or
before the row start. One pass keeps a running maximum and a running sum of exp(x - maximum)
(online softmax: rescaled when the maximum grows; -inf entries add nothing), merged across the
group by shuffles; the first ITEMS vectors of each thread stay in registers for the output, so
a row of up to G * ITEMS vectors is read once. exp is __expf, one ex2.approx per element;
expf would add a range reduction of several FMAs (program.md, section CUDA C++).
"""

import torch

from autokernel.cuda_build import load

KERNEL_TYPE = "softmax"
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

// Running maximum and sum of exp(x - maximum) of the elements seen so far.
struct MaxSum {
  float m, s;
};

__device__ __forceinline__ MaxSum merge(MaxSum a, MaxSum b) {
  const float m = fmaxf(a.m, b.m);
  if (m == -INFINITY) return {m, 0.f};  // only -inf so far (masked positions)
  return {m, a.s * __expf(a.m - m) + b.s * __expf(b.m - m)};
}

__device__ __forceinline__ void absorb(MaxSum& acc, float f) {
  if (f > acc.m) {
    acc.s = acc.s * __expf(acc.m - f) + 1.f;
    acc.m = f;
  } else if (f > -INFINITY) {
    acc.s += __expf(f - acc.m);
  }
}

// merge() over a group of g lanes; the butterfly gives every lane the same result because
// merge is commutative.
__device__ __forceinline__ MaxSum group_merge(MaxSum v, int g) {
  for (int off = g >> 1; off > 0; off >>= 1) {
    const MaxSum o = {__shfl_xor_sync(0xffffffffu, v.m, off),
                      __shfl_xor_sync(0xffffffffu, v.s, off)};
    v = merge(v, o);
  }
  return v;
}

__device__ __forceinline__ MaxSum row_merge(MaxSum v, int g, float* red_m, float* red_s) {
  if (g <= 32) return group_merge(v, g);
  v = group_merge(v, 32);
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  __syncthreads();
  if (lane == 0) {
    red_m[warp] = v.m;
    red_s[warp] = v.s;
  }
  __syncthreads();
  const bool has = lane < (int)(blockDim.x >> 5);
  v = {has ? red_m[lane] : -INFINITY, has ? red_s[lane] : 0.f};
  return group_merge(v, 32);
}

template <typename T, int VEC>
__device__ __forceinline__ void softmax_rows(const T* __restrict__ x, T* __restrict__ y,
                                             long long rows, long long cols, long long xs,
                                             long long ys, int g) {
  __shared__ float red_m[32], red_s[32];
  const long long row = (long long)blockIdx.x * (blockDim.x / g) + threadIdx.x / g;
  const int t = threadIdx.x % g;
  const bool valid = row < rows;
  const Row<T, VEC> r(x + (valid ? row : 0) * xs, cols);
  T* yr = y + (valid ? row : 0) * ys;
  T* ya = yr - r.mis;
  Pack<T, VEC> cache[ITEMS];
  MaxSum acc = {-INFINITY, 0.f};
  auto take = [&](long long k, const Pack<T, VEC>& p) {
#pragma unroll
    for (int j = 0; j < VEC; ++j) {
      const long long e = r.first(k) + j;
      if (e >= 0 && e < cols) absorb(acc, to_f(p.v[j]));
    }
  };
  if (valid) {
#pragma unroll
    for (int i = 0; i < ITEMS; ++i) {
      const long long k = t + (long long)i * g;
      if (k < r.nvec) cache[i] = r.load(k);
    }
#pragma unroll
    for (int i = 0; i < ITEMS; ++i) {
      const long long k = t + (long long)i * g;
      if (k < r.nvec) take(k, cache[i]);
    }
    for (long long k = t + (long long)ITEMS * g; k < r.nvec; k += g) take(k, r.load(k));
  }
  const MaxSum total = row_merge(acc, g, red_m, red_s);
  const float inv = 1.f / total.s;
  if (!valid) return;
  auto emit = [&](long long k, const Pack<T, VEC>& p) {
    if (r.whole(k)) {
      Pack<T, VEC> o;
#pragma unroll
      for (int j = 0; j < VEC; ++j) o.v[j] = from_f<T>(__expf(to_f(p.v[j]) - total.m) * inv);
      *reinterpret_cast<Pack<T, VEC>*>(ya + k * VEC) = o;
    } else {
#pragma unroll
      for (int j = 0; j < VEC; ++j) {
        const long long e = r.first(k) + j;
        if (e >= 0 && e < cols) yr[e] = from_f<T>(__expf(to_f(p.v[j]) - total.m) * inv);
      }
    }
  };
#pragma unroll
  for (int i = 0; i < ITEMS; ++i) {
    const long long k = t + (long long)i * g;
    if (k < r.nvec) emit(k, cache[i]);
  }
  for (long long k = t + (long long)ITEMS * g; k < r.nvec; k += g) emit(k, r.load(k));
}

extern "C" __global__ void __launch_bounds__(BOUND) softmax_f16(
    const __half* x, __half* y, long long rows, long long cols, long long xs, long long ys,
    int g) {
  softmax_rows<__half, 8>(x, y, rows, cols, xs, ys, g);
}
extern "C" __global__ void __launch_bounds__(BOUND) softmax_bf16(
    const __nv_bfloat16* x, __nv_bfloat16* y, long long rows, long long cols, long long xs,
    long long ys, int g) {
  softmax_rows<__nv_bfloat16, 8>(x, y, rows, cols, xs, ys, g);
}
extern "C" __global__ void __launch_bounds__(BOUND) softmax_f32(
    const float* x, float* y, long long rows, long long cols, long long xs, long long ys, int g) {
  softmax_rows<float, 4>(x, y, rows, cols, xs, ys, g);
}
extern "C" __global__ void __launch_bounds__(BOUND) softmax_f16_scalar(
    const __half* x, __half* y, long long rows, long long cols, long long xs, long long ys,
    int g) {
  softmax_rows<__half, 1>(x, y, rows, cols, xs, ys, g);
}
extern "C" __global__ void __launch_bounds__(BOUND) softmax_bf16_scalar(
    const __nv_bfloat16* x, __nv_bfloat16* y, long long rows, long long cols, long long xs,
    long long ys, int g) {
  softmax_rows<__nv_bfloat16, 1>(x, y, rows, cols, xs, ys, g);
}
extern "C" __global__ void __launch_bounds__(BOUND) softmax_f32_scalar(
    const float* x, float* y, long long rows, long long cols, long long xs, long long ys, int g) {
  softmax_rows<float, 1>(x, y, rows, cols, xs, ys, g);
}
"""

_MOD = load(CUDA_SOURCE, CONFIG)
# (dtype, vector walk) -> kernel
_KERNELS = {
    (torch.float16, True): _MOD.softmax_f16,
    (torch.bfloat16, True): _MOD.softmax_bf16,
    (torch.float32, True): _MOD.softmax_f32,
    (torch.float16, False): _MOD.softmax_f16_scalar,
    (torch.bfloat16, False): _MOD.softmax_bf16_scalar,
    (torch.float32, False): _MOD.softmax_f32_scalar,
}
_PLANS: dict = {}  # launch plans by call signature; emptied when full
MAX_PLANS = 1024


def kernel_fn(x: torch.Tensor) -> torch.Tensor:
    cols = x.shape[-1]
    out = torch.empty(x.shape, dtype=x.dtype, device=x.device)
    if x.numel() == 0:
        return out
    x2 = x.reshape(-1, cols)
    if x2.stride(-1) != 1:
        x2 = x2.contiguous()
    y2 = out.view(-1, cols)
    key = (x2.shape, x2.stride(0), x.dtype, x2.data_ptr() % 16)
    plan = _PLANS.get(key)
    if plan is None:
        if len(_PLANS) >= MAX_PLANS:
            _PLANS.clear()
        same = _same_offsets(x2, y2)
        g, block, grid = _rows_plan(x2.shape[0], cols, 16 // x2.element_size() if same else 1)
        plan = _PLANS[key] = (_KERNELS[(x.dtype, same)], grid, block, g)
    kernel, grid, block, g = plan
    kernel(grid, block, x2, y2, x2.shape[0], cols, x2.stride(0), cols, g)
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


def _same_offsets(a: torch.Tensor, b: torch.Tensor) -> bool:
    """Whether every row of a and of b sits at the same offset from a 16-byte boundary (the
    vector walk loads a's vectors and stores b's at the same positions)."""
    size = a.element_size()
    return a.data_ptr() % 16 == b.data_ptr() % 16 and (a.stride(0) - b.stride(0)) * size % 16 == 0


def _pow2(n: int) -> int:
    return 1 << (n - 1).bit_length() if n > 1 else 1
