"""Mean token cross-entropy in CUDA C++: logits (N, V) in any of fp16/bf16/fp32, int64 targets,
-100 ignored; fp32 loss, as models compute it after upcasting the logits.

Two kernels. The first gives each row to a group of G threads (a slice of a warp for short
vocabularies, a whole block for LLM ones) that walks it once in 16-byte vectors from the 16-byte
boundary at or before the row, ITEMS loads in flight per thread, keeping a running maximum and
a running sum of exp(x - maximum) (online log-sum-exp, rescaled once per step; a logit in the
thousands never overflows), merged across the group by shuffles in a fixed order; the row's
loss is max + log(sum) - x[target], or 0 for an ignored row. The second sums the row losses and
counts the rows that count, in one block in a fixed order, so the mean is bitwise deterministic
(no atomics).
"""

import torch

from autokernel.cuda_build import load

KERNEL_TYPE = "cross_entropy"
BACKEND = "cuda"
# Tunables; the builder passes each as a -D define, and kernel_fn reads them for the launch.
# ITEMS: 16-byte loads a thread has in flight per step; MAX_THREADS: most threads on one row;
# NARROW_BLOCK: block size when a row needs a warp or less.
CONFIG = {"ITEMS": 6, "MAX_THREADS": 512, "NARROW_BLOCK": 256}
SEARCH_SPACE = {
    "ITEMS": [2, 4, 6],
    "MAX_THREADS": [128, 256, 512, 1024],
    "NARROW_BLOCK": [64, 128, 256, 512],
}

CUDA_SOURCE = r"""
#include <cuda_fp16.h>
#include <cuda_bf16.h>

#define IGNORE_INDEX (-100)

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
  static __device__ __forceinline__ float one(float v) { return v; }
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
  static __device__ __forceinline__ float one(__nv_bfloat16 v) { return __bfloat162float(v); }
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
  static __device__ __forceinline__ float one(__half v) { return __half2float(v); }
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

// A running maximum and the sum of exp(x - maximum) over the elements seen so far.
struct MaxSum {
  float m, s;
};

// Two MaxSums as one. Commutative (fmaxf and the sum of two terms are), so the butterfly below
// gives every lane the same result.
__device__ __forceinline__ MaxSum merge(MaxSum a, MaxSum b) {
  const float m = fmaxf(a.m, b.m);
  if (m == -INFINITY) return {m, 0.f};  // nothing but masked (-inf) logits so far
  return {m, a.s * __expf(a.m - m) + b.s * __expf(b.m - m)};
}

__device__ __forceinline__ MaxSum group_merge(MaxSum v, int g) {
  for (int off = g >> 1; off > 0; off >>= 1)
    v = merge(v, {__shfl_xor_sync(0xffffffffu, v.m, off), __shfl_xor_sync(0xffffffffu, v.s, off)});
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

__device__ __forceinline__ MaxSum block_merge(MaxSum v, float* red_m, float* red_s) {
  v = group_merge(v, 32);
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  __syncthreads();
  if (lane == 0) {
    red_m[warp] = v.m;
    red_s[warp] = v.s;
  }
  __syncthreads();
  const bool has = lane < (int)(blockDim.x >> 5);
  return group_merge({has ? red_m[lane] : -INFINITY, has ? red_s[lane] : 0.f}, 32);
}

// Largest element of vector k that lies in the row (columns k * VEC - mis + j); -inf if none.
template <typename T>
__device__ __forceinline__ float vec_max(const uint4& v, int k, int mis, int cols) {
  constexpr int VEC = Cvt<T>::VEC;
  float f[VEC];
  unpack<T>(v, f);
  const int e0 = k * VEC - mis;
  float m = -INFINITY;
  if (e0 >= 0 && e0 + VEC <= cols) {
#pragma unroll
    for (int j = 0; j < VEC; ++j) m = fmaxf(m, f[j]);
  } else {
#pragma unroll
    for (int j = 0; j < VEC; ++j) m = (e0 + j >= 0 && e0 + j < cols) ? fmaxf(m, f[j]) : m;
  }
  return m;
}

// Sum of exp(x - m) over the elements of vector k that lie in the row. __expf is one
// ex2.approx (with a multiply); expf adds a range reduction of several FMAs.
template <typename T>
__device__ __forceinline__ float vec_sum_exp(const uint4& v, int k, int mis, int cols, float m) {
  constexpr int VEC = Cvt<T>::VEC;
  float f[VEC];
  unpack<T>(v, f);
  const int e0 = k * VEC - mis;
  float s = 0.f;
  if (e0 >= 0 && e0 + VEC <= cols) {
#pragma unroll
    for (int j = 0; j < VEC; ++j) s += __expf(f[j] - m);
  } else {
#pragma unroll
    for (int j = 0; j < VEC; ++j) s += (e0 + j >= 0 && e0 + j < cols) ? __expf(f[j] - m) : 0.f;
  }
  return s;
}

template <typename T>
__device__ __forceinline__ void ce_rows(const T* __restrict__ x, const long long* __restrict__ tgt,
                                        float* __restrict__ loss, long long rows, int cols,
                                        long long xs, int g) {
  constexpr int VEC = Cvt<T>::VEC;
  __shared__ float red_m[32], red_s[32];
  const long long row = (long long)blockIdx.x * (blockDim.x / g) + threadIdx.x / g;
  const int t = threadIdx.x % g;
  const bool valid = row < rows;
  const T* xr = x + (valid ? row : 0) * xs;
  // Any row start: the walk begins at the 16-byte boundary at or before it.
  const int mis = (int)(((unsigned long long)xr % 16) / sizeof(T));
  const uint4* xv = reinterpret_cast<const uint4*>(xr - mis);
  const int nvec = valid ? (cols + mis + VEC - 1) / VEC : 0;
  // One pass, ITEMS independent 16-byte loads in flight per thread per step; the running
  // maximum moves once a step (one rescale of the sum per ITEMS vectors).
  MaxSum acc = {-INFINITY, 0.f};
  for (int k0 = t; k0 < nvec; k0 += ITEMS * g) {
    uint4 p[ITEMS];
#pragma unroll
    for (int i = 0; i < ITEMS; ++i) {
      const int k = k0 + i * g;
      if (k < nvec) p[i] = __ldg(xv + k);
    }
    float m = acc.m;
#pragma unroll
    for (int i = 0; i < ITEMS; ++i) {
      const int k = k0 + i * g;
      if (k < nvec) m = fmaxf(m, vec_max<T>(p[i], k, mis, cols));
    }
    if (m == -INFINITY) continue;  // only masked logits so far
    float s = acc.s * __expf(acc.m - m);  // 0 while acc.m is -inf
#pragma unroll
    for (int i = 0; i < ITEMS; ++i) {
      const int k = k0 + i * g;
      if (k < nvec) s += vec_sum_exp<T>(p[i], k, mis, cols, m);
    }
    acc = {m, s};
  }
  const MaxSum total = g <= 32 ? group_merge(acc, g) : block_merge(acc, red_m, red_s);
  if (valid && t == 0) {
    const long long c = tgt[row];
    float l = 0.f;
    if (c != IGNORE_INDEX)  // a target outside the vocabulary gives NaN, never a wrong loss
      l = (c >= 0 && c < cols) ? total.m + logf(total.s) - Cvt<T>::one(xr[c]) : NAN;
    loss[row] = l;
  }
}

// The mean of the row losses over the rows whose target is not ignored: one block, a fixed
// order, so the result is bitwise the same every call.
extern "C" __global__ void __launch_bounds__(1024) ce_mean(const float* loss,
                                                           const long long* tgt, float* out,
                                                           long long rows) {
  __shared__ float red[32];
  float s = 0.f, n = 0.f;
  for (long long i = threadIdx.x; i < rows; i += blockDim.x) {
    if (tgt[i] != IGNORE_INDEX) {
      s += loss[i];
      n += 1.f;
    }
  }
  s = block_sum(s, red);
  n = block_sum(n, red);
  if (threadIdx.x == 0) out[0] = s / n;
}

// Entry points (parameter lists written out: the launcher reads them unpreprocessed).
extern "C" __global__ void __launch_bounds__(BOUND, MIN_BLOCKS) ce_rows_f16(
    const __half* x, const long long* tgt, float* loss, long long rows, int cols, long long xs,
    int g) {
  ce_rows<__half>(x, tgt, loss, rows, cols, xs, g);
}
extern "C" __global__ void __launch_bounds__(BOUND, MIN_BLOCKS) ce_rows_bf16(
    const __nv_bfloat16* x, const long long* tgt, float* loss, long long rows, int cols,
    long long xs, int g) {
  ce_rows<__nv_bfloat16>(x, tgt, loss, rows, cols, xs, g);
}
extern "C" __global__ void __launch_bounds__(BOUND, MIN_BLOCKS) ce_rows_f32(
    const float* x, const long long* tgt, float* loss, long long rows, int cols, long long xs,
    int g) {
  ce_rows<float>(x, tgt, loss, rows, cols, xs, g);
}
"""

_MOD = load(CUDA_SOURCE, CONFIG)
_KERNELS = {
    torch.float16: _MOD.ce_rows_f16,
    torch.bfloat16: _MOD.ce_rows_bf16,
    torch.float32: _MOD.ce_rows_f32,
}
_PLANS: dict = {}  # launch plans by call signature; emptied when full
MAX_PLANS = 1024
MAX_COLS = 2**31 - 64  # in-row indices are 32-bit in the kernel


def kernel_fn(logits: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
    rows, cols = logits.shape
    if cols > MAX_COLS:
        raise ValueError(f"vocabularies of {cols}: at most {MAX_COLS}")
    out = torch.empty((), dtype=torch.float32, device=logits.device)
    x = logits if logits.stride(-1) == 1 else logits.contiguous()
    t = targets if targets.is_contiguous() else targets.contiguous()
    loss = torch.empty((max(rows, 1),), dtype=torch.float32, device=logits.device)
    key = (x.shape, x.stride(0), x.dtype)
    plan = _PLANS.get(key)
    if plan is None:
        if len(_PLANS) >= MAX_PLANS:
            _PLANS.clear()
        plan = _PLANS[key] = rows_plan(rows, cols, x.element_size(), CONFIG)
    grid, block, g = plan
    if rows:
        _KERNELS[x.dtype](grid, block, x, t, loss, rows, cols, x.stride(0), g)
    _MOD.ce_mean(1, 1024, loss, t, out, rows)
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
