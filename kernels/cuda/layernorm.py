"""LayerNorm in CUDA C++ over the last dim (biased variance), any leading dims flattened to rows;
statistics and the affine transform in fp32, one cast when storing.

A group of G threads owns one row (a slice of a warp for narrow rows, many rows to a block;
the whole block for wide ones) and walks it in 16-byte vectors from the aligned address at or
before the row start, so odd widths still move whole vectors. The first ITEMS vectors of each
thread stay in registers: the mean, the variance of (x - mean) (never E[x^2] - E[x]^2, which
cancels when the mean is large against the spread) and the output all come from them, so a row
of up to G * ITEMS vectors is read from memory once; wider rows re-read the rest. Sums are warp
shuffles and one shared-memory step across warps, in a fixed order (bitwise deterministic).
"""

import torch

from autokernel.cuda_build import load

KERNEL_TYPE = "layernorm"
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
__device__ __forceinline__ void layernorm_rows(
    const T* __restrict__ x, const T* __restrict__ w, const T* __restrict__ b, T* __restrict__ y,
    long long rows, long long cols, long long xs, long long ys, float eps, int g, int p_vec) {
  __shared__ float red[32];
  const long long row = (long long)blockIdx.x * (blockDim.x / g) + threadIdx.x / g;
  const int t = threadIdx.x % g;
  const bool valid = row < rows;
  const Row<T, VEC> r(x + (valid ? row : 0) * xs, cols);
  T* yr = y + (valid ? row : 0) * ys;
  T* ya = yr - r.mis;
  Pack<T, VEC> cache[ITEMS];
  if (valid) {
#pragma unroll
    for (int i = 0; i < ITEMS; ++i) {
      const long long k = t + (long long)i * g;
      if (k < r.nvec) cache[i] = r.load(k);
    }
  }
  // fn(k, vector) for this thread's vectors: the cached ones, then the rest from memory.
  auto sweep = [&](auto&& fn) {
    if (!valid) return;
#pragma unroll
    for (int i = 0; i < ITEMS; ++i) {
      const long long k = t + (long long)i * g;
      if (k < r.nvec) fn(k, cache[i]);
    }
    for (long long k = t + (long long)ITEMS * g; k < r.nvec; k += g) fn(k, r.load(k));
  };
  float s = 0.f;
  sweep([&](long long k, const Pack<T, VEC>& p) {
#pragma unroll
    for (int j = 0; j < VEC; ++j) {
      const long long e = r.first(k) + j;
      if (e >= 0 && e < cols) s += to_f(p.v[j]);
    }
  });
  const float mean = row_sum(s, g, red) / (float)cols;
  // The variance from deviations (x - mean), never E[x^2] - E[x]^2, which cancels when the
  // mean is large against the spread.
  float q = 0.f;
  sweep([&](long long k, const Pack<T, VEC>& p) {
#pragma unroll
    for (int j = 0; j < VEC; ++j) {
      const long long e = r.first(k) + j;
      const float d = to_f(p.v[j]) - mean;
      if (e >= 0 && e < cols) q += d * d;
    }
  });
  const float rstd = rsqrtf(row_sum(q, g, red) / (float)cols + eps);
  sweep([&](long long k, const Pack<T, VEC>& p) {
    const long long e0 = r.first(k);
    if (r.whole(k)) {
      Pack<T, VEC> o;
      if (VEC > 1 && r.mis == 0 && p_vec) {
        const Pack<T, VEC> wv = *reinterpret_cast<const Pack<T, VEC>*>(w + e0);
        const Pack<T, VEC> bv = *reinterpret_cast<const Pack<T, VEC>*>(b + e0);
#pragma unroll
        for (int j = 0; j < VEC; ++j)
          o.v[j] = from_f<T>((to_f(p.v[j]) - mean) * rstd * to_f(wv.v[j]) + to_f(bv.v[j]));
      } else {
#pragma unroll
        for (int j = 0; j < VEC; ++j)
          o.v[j] = from_f<T>((to_f(p.v[j]) - mean) * rstd * to_f(w[e0 + j]) + to_f(b[e0 + j]));
      }
      *reinterpret_cast<Pack<T, VEC>*>(ya + k * VEC) = o;
    } else {
#pragma unroll
      for (int j = 0; j < VEC; ++j) {
        const long long e = e0 + j;
        if (e >= 0 && e < cols)
          yr[e] = from_f<T>((to_f(p.v[j]) - mean) * rstd * to_f(w[e]) + to_f(b[e]));
      }
    }
  });
}

extern "C" __global__ void __launch_bounds__(BOUND) layernorm_f16(
    const __half* x, const __half* w, const __half* b, __half* y, long long rows, long long cols,
    long long xs, long long ys, float eps, int g, int p_vec) {
  layernorm_rows<__half, 8>(x, w, b, y, rows, cols, xs, ys, eps, g, p_vec);
}
extern "C" __global__ void __launch_bounds__(BOUND) layernorm_bf16(
    const __nv_bfloat16* x, const __nv_bfloat16* w, const __nv_bfloat16* b, __nv_bfloat16* y,
    long long rows, long long cols, long long xs, long long ys, float eps, int g, int p_vec) {
  layernorm_rows<__nv_bfloat16, 8>(x, w, b, y, rows, cols, xs, ys, eps, g, p_vec);
}
extern "C" __global__ void __launch_bounds__(BOUND) layernorm_f32(
    const float* x, const float* w, const float* b, float* y, long long rows, long long cols,
    long long xs, long long ys, float eps, int g, int p_vec) {
  layernorm_rows<float, 4>(x, w, b, y, rows, cols, xs, ys, eps, g, p_vec);
}
extern "C" __global__ void __launch_bounds__(BOUND) layernorm_f16_scalar(
    const __half* x, const __half* w, const __half* b, __half* y, long long rows, long long cols,
    long long xs, long long ys, float eps, int g, int p_vec) {
  layernorm_rows<__half, 1>(x, w, b, y, rows, cols, xs, ys, eps, g, p_vec);
}
extern "C" __global__ void __launch_bounds__(BOUND) layernorm_bf16_scalar(
    const __nv_bfloat16* x, const __nv_bfloat16* w, const __nv_bfloat16* b, __nv_bfloat16* y,
    long long rows, long long cols, long long xs, long long ys, float eps, int g, int p_vec) {
  layernorm_rows<__nv_bfloat16, 1>(x, w, b, y, rows, cols, xs, ys, eps, g, p_vec);
}
extern "C" __global__ void __launch_bounds__(BOUND) layernorm_f32_scalar(
    const float* x, const float* w, const float* b, float* y, long long rows, long long cols,
    long long xs, long long ys, float eps, int g, int p_vec) {
  layernorm_rows<float, 1>(x, w, b, y, rows, cols, xs, ys, eps, g, p_vec);
}
"""

_MOD = load(CUDA_SOURCE, CONFIG)
# (dtype, vector walk) -> kernel
_KERNELS = {
    (torch.float16, True): _MOD.layernorm_f16,
    (torch.bfloat16, True): _MOD.layernorm_bf16,
    (torch.float32, True): _MOD.layernorm_f32,
    (torch.float16, False): _MOD.layernorm_f16_scalar,
    (torch.bfloat16, False): _MOD.layernorm_bf16_scalar,
    (torch.float32, False): _MOD.layernorm_f32_scalar,
}
_PLANS: dict = {}  # launch plans by call signature; emptied when full
MAX_PLANS = 1024


def kernel_fn(
    x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor, eps: float = 1e-5
) -> torch.Tensor:
    cols = x.shape[-1]
    out = torch.empty(x.shape, dtype=x.dtype, device=x.device)
    if x.numel() == 0:
        return out
    x2 = x.reshape(-1, cols)
    if x2.stride(-1) != 1:
        x2 = x2.contiguous()
    w = weight if weight.is_contiguous() else weight.contiguous()
    b = bias if bias.is_contiguous() else bias.contiguous()
    y2 = out.view(-1, cols)
    key = (x2.shape, x2.stride(0), x.dtype, x2.data_ptr() % 16, w.data_ptr() % 16,
           b.data_ptr() % 16)  # fmt: skip
    plan = _PLANS.get(key)
    if plan is None:
        if len(_PLANS) >= MAX_PLANS:
            _PLANS.clear()
        same = _same_offsets(x2, y2)
        g, block, grid = _rows_plan(x2.shape[0], cols, 16 // x2.element_size() if same else 1)
        p_vec = int(w.data_ptr() % 16 == 0 and b.data_ptr() % 16 == 0)
        plan = _PLANS[key] = (_KERNELS[(x.dtype, same)], grid, block, g, p_vec)
    kernel, grid, block, g, p_vec = plan
    kernel(grid, block, x2, w, b, y2, x2.shape[0], cols, x2.stride(0), cols, float(eps), g, p_vec)
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
