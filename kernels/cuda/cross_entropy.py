"""Mean token cross-entropy in CUDA C++: logits (N, V) in any of fp16/bf16/fp32, int64 targets,
-100 ignored; fp32 loss, as models compute it after upcasting the logits.

Two kernels. The first gives each row to a group of G threads (a slice of a warp for short
vocabularies, a whole block for LLM ones) that walks it once in 16-byte vectors from the
aligned address at or before the row, keeping a running maximum and a running sum of
exp(x - maximum) (online log-sum-exp; a logit in the thousands never overflows), merged across
the group by shuffles; the row's loss is max + log(sum) - x[target], or 0 for an ignored row.
The second sums the row losses and counts the rows that count, in one block in a fixed order,
so the mean is bitwise deterministic (no atomics).
"""

import torch

from autokernel.cuda_build import load

KERNEL_TYPE = "cross_entropy"
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

#define IGNORE_INDEX (-100)

template <typename T, int VEC>
__device__ __forceinline__ void ce_rows(const T* __restrict__ x, const long long* __restrict__ tgt,
                                        float* __restrict__ loss, long long rows,
                                        long long cols, long long xs, int g) {
  __shared__ float red_m[32], red_s[32];
  const long long row = (long long)blockIdx.x * (blockDim.x / g) + threadIdx.x / g;
  const int t = threadIdx.x % g;
  const bool valid = row < rows;
  const T* xr = x + (valid ? row : 0) * xs;
  const Row<T, VEC> r(xr, cols);
  MaxSum acc = {-INFINITY, 0.f};
  if (valid) {
    // ITEMS independent loads in flight per step, then absorbed in a fixed order.
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
#pragma unroll
        for (int j = 0; j < VEC; ++j) {
          const long long e = r.first(k) + j;
          if (e >= 0 && e < cols) absorb(acc, to_f(p[i].v[j]));
        }
      }
    }
  }
  const MaxSum total = row_merge(acc, g, red_m, red_s);
  if (valid && t == 0) {
    const long long c = tgt[row];
    float l = 0.f;
    if (c != IGNORE_INDEX)  // a target outside the vocabulary gives NaN, never a wrong loss
      l = (c >= 0 && c < cols) ? total.m + logf(total.s) - to_f(xr[c]) : NAN;
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

extern "C" __global__ void __launch_bounds__(BOUND) ce_rows_f16(
    const __half* x, const long long* tgt, float* loss, long long rows, long long cols,
    long long xs, int g) {
  ce_rows<__half, 8>(x, tgt, loss, rows, cols, xs, g);
}
extern "C" __global__ void __launch_bounds__(BOUND) ce_rows_bf16(
    const __nv_bfloat16* x, const long long* tgt, float* loss, long long rows, long long cols,
    long long xs, int g) {
  ce_rows<__nv_bfloat16, 8>(x, tgt, loss, rows, cols, xs, g);
}
extern "C" __global__ void __launch_bounds__(BOUND) ce_rows_f32(
    const float* x, const long long* tgt, float* loss, long long rows, long long cols,
    long long xs, int g) {
  ce_rows<float, 4>(x, tgt, loss, rows, cols, xs, g);
}
"""

_MOD = load(CUDA_SOURCE, CONFIG)
# dtype -> kernel
_KERNELS = {
    torch.float16: _MOD.ce_rows_f16,
    torch.bfloat16: _MOD.ce_rows_bf16,
    torch.float32: _MOD.ce_rows_f32,
}
_PLANS: dict = {}  # launch plans by call signature; emptied when full
MAX_PLANS = 1024


def kernel_fn(logits: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
    rows, cols = logits.shape
    out = torch.empty((), dtype=torch.float32, device=logits.device)
    x = logits if logits.stride(-1) == 1 else logits.contiguous()
    t = targets if targets.is_contiguous() else targets.contiguous()
    loss = torch.empty((max(rows, 1),), dtype=torch.float32, device=logits.device)
    key = (x.shape, x.stride(0), x.dtype)
    plan = _PLANS.get(key)
    if plan is None:
        if len(_PLANS) >= MAX_PLANS:
            _PLANS.clear()
        g, block, grid = _rows_plan(rows, cols, 16 // x.element_size())
        plan = _PLANS[key] = (_KERNELS[x.dtype], grid, block, g)
    kernel, grid, block, g = plan
    if rows:
        kernel(grid, block, x, t, loss, rows, cols, x.stride(0), g)
    _MOD.ce_mean(1, 1024, loss, t, out, rows)
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
