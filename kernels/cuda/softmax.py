"""Softmax in CUDA C++ over the last dim, any leading dims flattened to rows; computed in fp32,
one cast when storing.

A group of G threads owns one row: a slice of a warp for narrow rows (many rows to a block), the
whole block for wide ones. The row is walked in 16-byte vectors from the 16-byte boundary at or
before its start, so an odd width (50257) still moves whole 128-bit loads and stores; only the
first and last vector of a row are partial (masked, stored element by element). Thread t of the
group owns vectors t, t + G, t + 2G, ... (its slots): the first ITEMS slots stay in registers, the
next ones in shared memory (up to SMEM_KB per block, copied there with cp.async so that all of a
row's loads are in flight at once), so a row that fits is read from memory once; slots beyond that
are read again in each later pass. Three passes over the slots: the row maximum, the sum of
exp(x - maximum), the output. Reductions are shuffles (and one shared-memory step across warps) in
a fixed order: bitwise deterministic.
"""

import torch

from autokernel.cuda_build import load

KERNEL_TYPE = "softmax"
BACKEND = "cuda"
# Tunables; the builder passes each as a -D define, and kernel_fn reads them for the launch.
# ITEMS: 16-byte vectors a thread keeps in registers; MAX_THREADS: most threads on one row;
# NARROW_BLOCK: block size when a row needs a warp or less; SMEM_KB: shared memory a block may
# use for the slots of its row beyond the registers.
CONFIG = {"ITEMS": 4, "MAX_THREADS": 512, "NARROW_BLOCK": 256, "SMEM_KB": 96}
SEARCH_SPACE = {
    "ITEMS": [2, 4, 6, 8],
    "MAX_THREADS": [128, 256, 512, 1024],
    "NARROW_BLOCK": [64, 128, 256, 512],
    "SMEM_KB": [0, 48, 96, 192],
}

CUDA_SOURCE = r"""
#include <cuda_fp16.h>
#include <cuda_bf16.h>
#include <cuda_pipeline_primitives.h>

// The larger of the two block sizes kernel_fn launches, and room for 1024 / BOUND blocks: a cap
// of 64 registers a thread (the 64K-register file over 1024 threads), so two 512-thread rows or
// eight 128-thread rows are resident on an SM together.
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
__device__ __forceinline__ float group_max(float v, int g) {
  for (int off = g >> 1; off > 0; off >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, off));
  return v;
}

// Sum (maximum) over the whole block (blockDim a multiple of 32); every thread gets the same.
__device__ __forceinline__ float block_sum(float v, float* red) {
  v = group_sum(v, 32);
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  __syncthreads();  // red may still be read by an earlier reduction
  if (lane == 0) red[warp] = v;
  __syncthreads();
  v = lane < (int)(blockDim.x >> 5) ? red[lane] : 0.f;
  return group_sum(v, 32);
}
__device__ __forceinline__ float block_max(float v, float* red) {
  v = group_max(v, 32);
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  __syncthreads();
  if (lane == 0) red[warp] = v;
  __syncthreads();
  v = lane < (int)(blockDim.x >> 5) ? red[lane] : -INFINITY;
  return group_max(v, 32);
}

// The slots ITEMS .. ITEMS + smem_items - 1 of this thread (those in the row), copied from
// global to shared memory with cp.async (LDGSTS, 16-byte aligned at both ends): no register
// holds them on the way, so all of them are in flight together with the register loads issued
// just before. A loop of one LDG per slot instead waits a whole memory latency per slot
// (ptxas does not move a load above the loop's exit test): at 4096 x 50257 bf16, 7 of a
// thread's 13 slots. Waits for the copies; a thread reads back only the slots it copied, which
// cp.async.wait_group makes visible to it, so no barrier is needed.
__device__ __forceinline__ void stash_row(uint4* stash, int smem_items,
                                          const uint4* __restrict__ xv, int nvec, int t, int g) {
  for (int s = 0, k = t + ITEMS * g; s < smem_items && k < nvec; ++s, k += g)
    __pipeline_memcpy_async(stash + s * g + t, xv + k, sizeof(uint4));
  __pipeline_commit();
  __pipeline_wait_prior(0);
}

// f(vector, k) for each vector k of this thread's slots in order: slot s is vector t + s * g,
// in registers for s < ITEMS, in shared memory for the next smem_items, else loaded again
// (a row too wide for the chip).
template <typename F>
__device__ __forceinline__ void each_slot(const uint4 (&reg)[ITEMS], const uint4* stash,
                                          int smem_items, const uint4* __restrict__ xv,
                                          int nvec, int t, int g, F&& f) {
#pragma unroll
  for (int s = 0; s < ITEMS; ++s) {
    const int k = t + s * g;
    if (k < nvec) f(reg[s], k);
  }
  int k = t + ITEMS * g;
#pragma unroll 4
  for (int s = 0; s < smem_items && k < nvec; ++s, k += g) f(stash[s * g + t], k);
#pragma unroll 4
  for (; k < nvec; k += g) f(__ldg(xv + k), k);
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

// y = exp(x - m) * inv for vector k: one 128-bit store when the vector lies in the row, else
// its in-row elements one by one.
template <typename T>
__device__ __forceinline__ void emit(const uint4& v, int k, int mis, int cols, float m,
                                     float inv, uint4* yv, T* yr) {
  constexpr int VEC = Cvt<T>::VEC;
  float f[VEC];
  unpack<T>(v, f);
#pragma unroll
  for (int j = 0; j < VEC; ++j) f[j] = __expf(f[j] - m) * inv;
  const int e0 = k * VEC - mis;
  if (e0 >= 0 && e0 + VEC <= cols) {
    yv[k] = Cvt<T>::pack(f);
  } else {
#pragma unroll
    for (int j = 0; j < VEC; ++j)
      if (e0 + j >= 0 && e0 + j < cols) yr[e0 + j] = Cvt<T>::from(f[j]);
  }
}

template <typename T>
__device__ __forceinline__ void softmax_rows(const T* __restrict__ x, T* __restrict__ y,
                                             long long rows, int cols, long long xs,
                                             long long ys, int g, int smem_items) {
  constexpr int VEC = Cvt<T>::VEC;
  extern __shared__ uint4 stash[];  // slots ITEMS .. ITEMS + smem_items - 1 of every thread
  __shared__ float red[32];
  const long long row = (long long)blockIdx.x * (blockDim.x / g) + threadIdx.x / g;
  const int t = threadIdx.x % g;
  const bool valid = row < rows;
  const T* xr = x + (valid ? row : 0) * xs;
  T* yr = y + (valid ? row : 0) * ys;
  // x's and y's rows sit at the same offset from a 16-byte boundary (kernel_fn makes sure).
  const int mis = (int)(((unsigned long long)xr % 16) / sizeof(T));
  const uint4* xv = reinterpret_cast<const uint4*>(xr - mis);
  uint4* yv = reinterpret_cast<uint4*>(yr - mis);
  const int nvec = valid ? (cols + mis + VEC - 1) / VEC : 0;

  // Pass 1, the row maximum: the slots loaded (all of the registers' in flight at once) and
  // kept on chip.
  uint4 reg[ITEMS];
#pragma unroll
  for (int s = 0; s < ITEMS; ++s) {
    const int k = t + s * g;
    if (k < nvec) reg[s] = __ldg(xv + k);
  }
  stash_row(stash, smem_items, xv, nvec, t, g);
  float m = -INFINITY;
  each_slot(reg, stash, smem_items, xv, nvec, t, g,
            [&](const uint4& v, int k) { m = fmaxf(m, vec_max<T>(v, k, mis, cols)); });
  m = g <= 32 ? group_max(m, g) : block_max(m, red);
  // Pass 2, the sum of exp(x - max); a thread reads back only the stash slots it wrote.
  float sum = 0.f;
  each_slot(reg, stash, smem_items, xv, nvec, t, g,
            [&](const uint4& v, int k) { sum += vec_sum_exp<T>(v, k, mis, cols, m); });
  sum = g <= 32 ? group_sum(sum, g) : block_sum(sum, red);
  const float inv = 1.f / sum;
  // Pass 3, the output.
  each_slot(reg, stash, smem_items, xv, nvec, t, g,
            [&](const uint4& v, int k) { emit<T>(v, k, mis, cols, m, inv, yv, yr); });
}

// Entry points (parameter lists written out: the launcher reads them unpreprocessed).
extern "C" __global__ void __launch_bounds__(BOUND, MIN_BLOCKS) softmax_f16(
    const __half* x, __half* y, long long rows, int cols, long long xs, long long ys, int g,
    int smem_items) {
  softmax_rows<__half>(x, y, rows, cols, xs, ys, g, smem_items);
}
extern "C" __global__ void __launch_bounds__(BOUND, MIN_BLOCKS) softmax_bf16(
    const __nv_bfloat16* x, __nv_bfloat16* y, long long rows, int cols, long long xs,
    long long ys, int g, int smem_items) {
  softmax_rows<__nv_bfloat16>(x, y, rows, cols, xs, ys, g, smem_items);
}
extern "C" __global__ void __launch_bounds__(BOUND, MIN_BLOCKS) softmax_f32(
    const float* x, float* y, long long rows, int cols, long long xs, long long ys, int g,
    int smem_items) {
  softmax_rows<float>(x, y, rows, cols, xs, ys, g, smem_items);
}
"""

_MOD = load(CUDA_SOURCE, CONFIG)
_KERNELS = {
    torch.float16: _MOD.softmax_f16,
    torch.bfloat16: _MOD.softmax_bf16,
    torch.float32: _MOD.softmax_f32,
}
_PLANS: dict = {}  # launch plans by call signature; emptied when full
MAX_PLANS = 1024
MAX_COLS = 2**31 - 64  # in-row indices are 32-bit in the kernel


def kernel_fn(x: torch.Tensor) -> torch.Tensor:
    cols = x.shape[-1]
    out = torch.empty(x.shape, dtype=x.dtype, device=x.device)
    if x.numel() == 0:
        return out
    if cols > MAX_COLS:
        raise ValueError(f"rows of {cols} elements: at most {MAX_COLS}")
    x2 = x.reshape(-1, cols)
    # The vector walk stores y's vectors where it loads x's: every row of x must sit at the
    # same offset from a 16-byte boundary as the row of the (aligned, contiguous) output. An
    # offset view is copied first.
    if x2.stride(-1) != 1 or x2.data_ptr() % 16 or (x2.stride(0) - cols) * x2.element_size() % 16:
        x2 = _fresh(x2)
    y2 = out.view(-1, cols)
    key = (x2.shape, x2.stride(0), x.dtype)
    plan = _PLANS.get(key)
    if plan is None:
        if len(_PLANS) >= MAX_PLANS:
            _PLANS.clear()
        plan = _PLANS[key] = rows_plan(x2.shape[0], cols, x2.element_size(), CONFIG)
    grid, block, g, smem_items, shared = plan
    _KERNELS[x.dtype](grid, block, x2, y2, x2.shape[0], cols, x2.stride(0), cols, g, smem_items,
                      shared=shared)  # fmt: skip
    return out


def rows_plan(rows: int, cols: int, size: int, config: dict) -> tuple[int, int, int, int, int]:
    """(grid, block, threads per row g, shared-memory slots per thread, shared bytes).

    g: enough threads that ITEMS vectors each cover the row (one vector more where a row may
    start inside a vector), a power of two up to MAX_THREADS. Past 32 a row takes the whole
    block; below, NARROW_BLOCK // g rows share a block. Slots beyond ITEMS go to shared memory
    while SMEM_KB allows; the rest are loaded again by each later pass."""
    vec = 16 // size
    nvec = -(-cols // vec) + (cols % vec != 0)  # x's base is 16-byte aligned (kernel_fn)
    g = min(_pow2(-(-nvec // config["ITEMS"])), config["MAX_THREADS"])
    if g > 32:
        block = g
    else:  # several rows per block, a block no larger than the rows need
        block = max(32, min(config["NARROW_BLOCK"], 32 * _pow2(-(-rows * g // 32))))
    slots = -(-nvec // g)
    smem_items = min(max(slots - config["ITEMS"], 0), config["SMEM_KB"] * 1024 // (16 * g))
    if g <= 32:
        smem_items = 0  # a narrow row fits in registers (g * ITEMS >= nvec)
    return -(-rows // (block // g)), block, g, smem_items, smem_items * g * 16


def _fresh(t: torch.Tensor) -> torch.Tensor:
    """A contiguous copy of t in a new allocation (16-byte aligned, as torch's always are)."""
    out = torch.empty(t.shape, dtype=t.dtype, device=t.device)
    out.copy_(t)
    return out


def _pow2(n: int) -> int:
    return 1 << (n - 1).bit_length() if n > 1 else 1
