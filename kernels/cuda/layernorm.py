"""LayerNorm in CUDA C++ over the last dim (biased variance), any leading dims flattened to
rows; statistics in fp32, one cast when storing.

A group of G threads owns one row: a slice of a warp for narrow rows (many rows to a block), the
whole block for wide ones. Rows are walked in 16-byte vectors from the 16-byte boundary at or
before their start, so an odd width (50257) still moves whole 128-bit loads and stores; only a
row's first and last vectors are partial (masked, stored element by element). Thread t owns
vectors t, t + G, ... (its slots): ITEMS in registers, the next in shared memory (up to SMEM_KB
a block), the rest read again by each later pass. Three passes: the mean, the variance about it
(exact where E[x^2] - E[x]^2 cancels), the output; reductions are shuffles and a shared-memory
step, in a fixed order (bitwise deterministic). Weight and bias are read at the row's offset
from a 16-byte boundary (odd widths sit at all 8): two aligned vectors, shifted at compile time.
Longer rows take the wide path where it fits (4096x50257 ran at 49 % of copy, reading weight
and bias from L2 for every row): one block of WIDE_THREADS an SM loops over rows, weight and
bias in its shared memory (loaded once), the row in registers; a row's loads go out at once.
"""

import torch

from autokernel.cuda_build import load

KERNEL_TYPE = "layernorm"
BACKEND = "cuda"
# Tunables; the builder passes each as a -D define, and kernel_fn reads them for the launch.
# ITEMS: 16-byte vectors a thread keeps in registers; MAX_THREADS: most threads on one row;
# NARROW_BLOCK: block size when a row needs a warp or less; SMEM_KB: shared memory a block may
# use for the slots of its row beyond the registers. Rows that would need those take the wide
# path: WIDE_THREADS a block, one block an SM, WIDE_ITEMS register slots a thread.
CONFIG = {"ITEMS": 6, "MAX_THREADS": 512, "NARROW_BLOCK": 256, "SMEM_KB": 96,
          "WIDE_THREADS": 1024, "WIDE_ITEMS": 7}  # fmt: skip
SEARCH_SPACE = {"ITEMS": [2, 4, 6, 8], "MAX_THREADS": [128, 256, 512, 1024],
                "NARROW_BLOCK": [64, 128, 256, 512], "SMEM_KB": [0, 48, 96, 192],
                "WIDE_THREADS": [512, 1024], "WIDE_ITEMS": [4, 7, 13, 16]}  # fmt: skip

CUDA_SOURCE = r"""
#include <cuda_fp16.h>
#include <cuda_bf16.h>

// The larger of the two block sizes kernel_fn launches, and room for 1024 / BOUND blocks: a cap
// of 64 registers a thread (the 64K-register file over 1024 threads), so two 512-thread rows or
// eight 128-thread rows are resident on an SM together.
#define BOUND (MAX_THREADS > NARROW_BLOCK ? MAX_THREADS : NARROW_BLOCK)
#define MIN_BLOCKS (1024 / BOUND)

// One 16-byte vector of T as VEC floats, and back. The 16 bytes travel as a uint4, so every
// load and store is one 128-bit instruction (LDG.E.128 / STG.E.128; a struct of 8 bf16 filled
// element by element became eight 2-byte stores). at(w, q): element q of words w[0..7].
#define DI __device__ __forceinline__
#define DEV static DI
template <typename H2> DEV unsigned bits(H2 h) { return *reinterpret_cast<const unsigned*>(&h); }
template <typename T> struct Cvt;
template <> struct Cvt<float> {
  static constexpr int VEC = 4;
  DEV float at(const unsigned* w, int q) { return __uint_as_float(w[q]); }
  DEV uint4 pack(const float* f) {
    return make_uint4(bits(f[0]), bits(f[1]), bits(f[2]), bits(f[3]));
  }
  DEV float from(float v) { return v; }
};
template <> struct Cvt<__nv_bfloat16> {
  static constexpr int VEC = 8;
  DEV float at(const unsigned* w, int q) {
    return __uint_as_float(q % 2 ? w[q / 2] & 0xffff0000u : w[q / 2] << 16);
  }
  DEV unsigned two(float a, float b) { return bits(__floats2bfloat162_rn(a, b)); }  // a low
  DEV uint4 pack(const float* f) {
    return make_uint4(two(f[0], f[1]), two(f[2], f[3]), two(f[4], f[5]), two(f[6], f[7]));
  }
  DEV __nv_bfloat16 from(float v) { return __float2bfloat16_rn(v); }
};
template <> struct Cvt<__half> {
  static constexpr int VEC = 8;
  DEV float at(const unsigned* w, int q) {
    const unsigned bits = q % 2 ? w[q / 2] >> 16 : w[q / 2] & 0xffffu;
    return __half2float(__ushort_as_half((unsigned short)bits));
  }
  DEV unsigned two(float a, float b) { return bits(__floats2half2_rn(a, b)); }  // a low
  DEV uint4 pack(const float* f) {
    return make_uint4(two(f[0], f[1]), two(f[2], f[3]), two(f[4], f[5]), two(f[6], f[7]));
  }
  DEV __half from(float v) { return __float2half_rn(v); }
};

template <typename T> DI void unpack(const uint4& r, float* f) {
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

// f(vector, k) for each vector k of this thread's slots in order: slot s is vector t + s * g,
// in registers for s < ITEMS, in shared memory for the next smem_items, else loaded again.
template <typename F>
DI void each_slot(const uint4 (&reg)[ITEMS], const uint4* stash, int smem_items,
                  const uint4* __restrict__ xv, int nvec, int t, int g, F&& f) {
#pragma unroll
  for (int s = 0, k = t; s < ITEMS; ++s, k += g)
    if (k < nvec) f(reg[s], k);
#pragma unroll 4
  for (int s = ITEMS, k = t + ITEMS * g; k < nvec; ++s, k += g)
    f(s < ITEMS + smem_items ? stash[(s - ITEMS) * g + t] : __ldg(xv + k), k);
}

// Sum of the elements of vector k that lie in the row (columns k * VEC - mis + j), or (SQ) of
// their squared deviations from mean: the variance from the exact mean, so a row of mean 10 and
// std 0.1 keeps its digits (E[x^2] - E[x]^2 would cancel them in fp32).
template <typename T, bool SQ = false>
DI float vec_sum(const uint4& v, int k, int mis, int cols, float mean = 0.f) {
  constexpr int VEC = Cvt<T>::VEC;
  float f[VEC];
  unpack<T>(v, f);
  const int e0 = k * VEC - mis;
  float s = 0.f;
  if (!SQ && e0 >= 0 && e0 + VEC <= cols) {
#pragma unroll
    for (int j = 0; j < VEC; ++j) s += f[j];
  } else {
#pragma unroll
    for (int j = 0; j < VEC; ++j) {
      const float d = (e0 + j >= 0 && e0 + j < cols) ? f[j] - mean : 0.f;  // x - 0 is exact
      s = SQ ? fmaf(d, d, s) : s + d;
    }
  }
  return s;
}

// Columns k * VEC - MIS + j of a per-column parameter p (16-byte aligned): the last MIS
// elements of its aligned vector k - 1, then the first VEC - MIS of vector k, as 8 words (MIS a
// template argument: the shift is register renaming). Aligned vectors that hold a column of
// the row cannot fault, even where they run past its end. SMEM: p is in shared memory.
template <typename T, int MIS, bool SMEM>
DI void param_words(const uint4* __restrict__ pv, int k, int cols, unsigned (&w)[8]) {
  constexpr int VEC = Cvt<T>::VEC;
  const uint4 zero = make_uint4(0u, 0u, 0u, 0u);
  const uint4 lo = (MIS > 0 && k > 0) ? (SMEM ? pv[k - 1] : __ldg(pv + k - 1)) : zero;
  const uint4 hi = (k * VEC < cols) ? (SMEM ? pv[k] : __ldg(pv + k)) : zero;
  w[0] = lo.x; w[1] = lo.y; w[2] = lo.z; w[3] = lo.w;
  w[4] = hi.x; w[5] = hi.y; w[6] = hi.z; w[7] = hi.w;
}

// y = (x - mean) * rstd * weight + bias for vector k of a row MIS elements past a 16-byte
// boundary: one 128-bit store when the vector lies in the row, else its in-row elements.
template <typename T, int MIS, bool SMEM = false>
DI void emit(const uint4& v, int k, int cols, float mean, float rstd,
             const uint4* __restrict__ wv, const uint4* __restrict__ bv, uint4* yv, T* yr) {
  constexpr int VEC = Cvt<T>::VEC;
  float f[VEC];
  unpack<T>(v, f);
  unsigned p[8];
  param_words<T, MIS, SMEM>(wv, k, cols, p);
#pragma unroll
  for (int j = 0; j < VEC; ++j) f[j] = (f[j] - mean) * rstd * Cvt<T>::at(p, VEC - MIS + j);
  param_words<T, MIS, SMEM>(bv, k, cols, p);
#pragma unroll
  for (int j = 0; j < VEC; ++j) f[j] += Cvt<T>::at(p, VEC - MIS + j);
  const int e0 = k * VEC - MIS;
  if (e0 >= 0 && e0 + VEC <= cols) {
    yv[k] = Cvt<T>::pack(f);
  } else {
#pragma unroll
    for (int j = 0; j < VEC; ++j)
      if (e0 + j >= 0 && e0 + j < cols) yr[e0 + j] = Cvt<T>::from(f[j]);
  }
}

// f(Mis<m>()) for the run-time offset m (uniform across the row's threads): the output pass
// is compiled once per offset, so the weight's shift is a compile-time one.
template <int M> struct Mis { static constexpr int value = M; };
template <typename T, int MIS = 0, typename F> DI void with_mis(int mis, F&& f) {
  if constexpr (MIS < Cvt<T>::VEC) mis == MIS ? f(Mis<MIS>()) : with_mis<T, MIS + 1>(mis, f);
}

// A row walked from the 16-byte boundary at or before its start; no vectors past `rows`.
template <typename T> struct RowAt {
  const uint4* xv;  // the boundary's vector; the row starts mis elements into it
  int mis, nvec;
  DI RowAt(const T* x, long long row, long long rows, long long xs, int cols) {
    const T* xr = x + (row < rows ? row : 0) * xs;
    mis = (int)(((unsigned long long)xr % 16) / sizeof(T));
    xv = reinterpret_cast<const uint4*>(xr - mis);
    nvec = row < rows ? (cols + mis + Cvt<T>::VEC - 1) / Cvt<T>::VEC : 0;
  }
};

template <typename T>
DI void layernorm_rows(const T* __restrict__ x, const T* __restrict__ w, const T* __restrict__ b,
                       T* __restrict__ y, long long rows, int cols, long long xs, long long ys,
                       float eps, int g, int smem_items) {
  extern __shared__ uint4 stash[];  // slots ITEMS .. ITEMS + smem_items - 1 of every thread
  __shared__ float red[32];
  const long long row = (long long)blockIdx.x * (blockDim.x / g) + threadIdx.x / g;
  const int t = threadIdx.x % g;
  const RowAt<T> r(x, row, rows, xs, cols);
  // x's and y's rows sit at the same offset from a 16-byte boundary (kernel_fn makes sure).
  T* yr = y + (row < rows ? row : 0) * ys;
  uint4* yv = reinterpret_cast<uint4*>(yr - r.mis);
  // Pass 1, the mean: the slots loaded (all of the registers' in flight at once) and kept.
  uint4 reg[ITEMS];
#pragma unroll
  for (int s = 0, k = t; s < ITEMS; ++s, k += g)
    if (k < r.nvec) reg[s] = __ldg(r.xv + k);
  float acc = 0.f;
#pragma unroll
  for (int s = 0, k = t; s < ITEMS; ++s, k += g)
    if (k < r.nvec) acc += vec_sum<T>(reg[s], k, r.mis, cols);
#pragma unroll 4
  for (int s = ITEMS, k = t + ITEMS * g; k < r.nvec; ++s, k += g) {
    const uint4 v = __ldg(r.xv + k);
    if (s < ITEMS + smem_items) stash[(s - ITEMS) * g + t] = v;
    acc += vec_sum<T>(v, k, r.mis, cols);
  }
  const float mean = (g <= 32 ? group_sum(acc, g) : block_sum(acc, red)) / (float)cols;
  // Pass 2, the biased variance; a thread reads back only the stash slots it wrote.
  acc = 0.f;
  each_slot(reg, stash, smem_items, r.xv, r.nvec, t, g,
            [&](const uint4& v, int k) { acc += vec_sum<T, true>(v, k, r.mis, cols, mean); });
  const float var = (g <= 32 ? group_sum(acc, g) : block_sum(acc, red)) / (float)cols;
  const float rstd = rsqrtf(var + eps);
  // Pass 3, the output.
  const uint4 *wv = reinterpret_cast<const uint4*>(w), *bv = reinterpret_cast<const uint4*>(b);
  with_mis<T>(r.mis, [&](auto m) {
    each_slot(reg, stash, smem_items, r.xv, r.nvec, t, g, [&](const uint4& v, int k) {
      emit<T, decltype(m)::value>(v, k, cols, mean, rstd, wv, bv, yv, yr);
    });
  });
}

// The wide path (docstring); g is the block as a constant, so slot offsets are immediates.
template <typename T>
DI void layernorm_wide(const T* __restrict__ x, const T* __restrict__ w, const T* __restrict__ b,
                       T* __restrict__ y, long long rows, int cols, long long xs, long long ys,
                       float eps) {
  constexpr int VEC = Cvt<T>::VEC, g = WIDE_THREADS;
  extern __shared__ uint4 params[];  // the weight's nw vectors, then the bias's
  __shared__ float red[32];
  const int t = threadIdx.x, nw = (cols + VEC - 1) / VEC;
  const uint4 *wv = reinterpret_cast<const uint4*>(w), *bv = reinterpret_cast<const uint4*>(b);
  for (int k = t; k < 2 * nw; k += g) params[k] = __ldg(k < nw ? wv + k : bv + (k - nw));
  __syncthreads();  // the parameters, each thread's share, for all
  for (long long row = blockIdx.x; row < rows; row += gridDim.x) {
    const RowAt<T> cur(x, row, rows, xs, cols);
    uint4 reg[WIDE_ITEMS];
#pragma unroll
    for (int s = 0, k = t; s < WIDE_ITEMS; ++s, k += g)
      if (k < cur.nvec) reg[s] = __ldg(cur.xv + k);
    float acc = 0.f;
#pragma unroll
    for (int s = 0, k = t; s < WIDE_ITEMS; ++s, k += g)
      if (k < cur.nvec) acc += vec_sum<T>(reg[s], k, cur.mis, cols);
    const float mean = block_sum(acc, red) / (float)cols;
    acc = 0.f;
#pragma unroll
    for (int s = 0, k = t; s < WIDE_ITEMS; ++s, k += g)
      if (k < cur.nvec) acc += vec_sum<T, true>(reg[s], k, cur.mis, cols, mean);
    const float rstd = rsqrtf(block_sum(acc, red) / (float)cols + eps);
    T* yr = y + row * ys;
    uint4* yv = reinterpret_cast<uint4*>(yr - cur.mis);
    with_mis<T>(cur.mis, [&](auto m) {
#pragma unroll
      for (int s = 0, k = t; s < WIDE_ITEMS; ++s, k += g)
        if (k < cur.nvec) emit<T, decltype(m)::value, true>(reg[s], k, cols, mean, rstd,
                                                             params, params + nw, yv, yr);
    });
  }
}

// Entry points (parameter lists written out: the launcher reads them unpreprocessed).
extern "C" __global__ void __launch_bounds__(BOUND, MIN_BLOCKS) layernorm_f16(
    const __half* x, const __half* w, const __half* b, __half* y, long long rows, int cols,
    long long xs, long long ys, float eps, int g, int smem_items) {
  layernorm_rows<__half>(x, w, b, y, rows, cols, xs, ys, eps, g, smem_items);
}
extern "C" __global__ void __launch_bounds__(BOUND, MIN_BLOCKS) layernorm_bf16(
    const __nv_bfloat16* x, const __nv_bfloat16* w, const __nv_bfloat16* b, __nv_bfloat16* y,
    long long rows, int cols, long long xs, long long ys, float eps, int g, int smem_items) {
  layernorm_rows<__nv_bfloat16>(x, w, b, y, rows, cols, xs, ys, eps, g, smem_items);
}
extern "C" __global__ void __launch_bounds__(BOUND, MIN_BLOCKS) layernorm_f32(
    const float* x, const float* w, const float* b, float* y, long long rows, int cols,
    long long xs, long long ys, float eps, int g, int smem_items) {
  layernorm_rows<float>(x, w, b, y, rows, cols, xs, ys, eps, g, smem_items);
}
extern "C" __global__ void __launch_bounds__(WIDE_THREADS, 1) layernorm_wide_f16(
    const __half* x, const __half* w, const __half* b, __half* y, long long rows, int cols,
    long long xs, long long ys, float eps) {
  layernorm_wide<__half>(x, w, b, y, rows, cols, xs, ys, eps);
}
extern "C" __global__ void __launch_bounds__(WIDE_THREADS, 1) layernorm_wide_bf16(
    const __nv_bfloat16* x, const __nv_bfloat16* w, const __nv_bfloat16* b, __nv_bfloat16* y,
    long long rows, int cols, long long xs, long long ys, float eps) {
  layernorm_wide<__nv_bfloat16>(x, w, b, y, rows, cols, xs, ys, eps);
}
extern "C" __global__ void __launch_bounds__(WIDE_THREADS, 1) layernorm_wide_f32(
    const float* x, const float* w, const float* b, float* y, long long rows, int cols,
    long long xs, long long ys, float eps) {
  layernorm_wide<float>(x, w, b, y, rows, cols, xs, ys, eps);
}
"""

_MOD = load(CUDA_SOURCE, CONFIG)
_KERNELS = {torch.float16: _MOD.layernorm_f16, torch.bfloat16: _MOD.layernorm_bf16,
            torch.float32: _MOD.layernorm_f32}  # fmt: skip
_WIDE = {torch.float16: _MOD.layernorm_wide_f16, torch.bfloat16: _MOD.layernorm_wide_bf16,
         torch.float32: _MOD.layernorm_wide_f32}  # fmt: skip
_PLANS: dict = {}  # launch plans by call signature; emptied when full
MAX_PLANS = 1024
MAX_COLS = 2**31 - 64  # in-row indices are 32-bit in the kernel


def kernel_fn(
    x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor, eps: float = 1e-5
) -> torch.Tensor:
    cols = x.shape[-1]
    out = torch.empty(x.shape, dtype=x.dtype, device=x.device)
    if x.numel() == 0:
        return out
    if cols > MAX_COLS:
        raise ValueError(f"rows of {cols} elements: at most {MAX_COLS}")
    x2 = x.reshape(-1, cols)
    # The vector walk stores y's vectors where it loads x's: every row of x must sit at the
    # same offset from a 16-byte boundary as the row of the (aligned, contiguous) output. An
    # offset view is copied first; so are parameters off a 16-byte boundary.
    if x2.stride(-1) != 1 or x2.data_ptr() % 16 or (x2.stride(0) - cols) * x2.element_size() % 16:
        x2 = _fresh(x2)
    w = weight if weight.is_contiguous() and weight.data_ptr() % 16 == 0 else _fresh(weight)
    b = bias if bias.is_contiguous() and bias.data_ptr() % 16 == 0 else _fresh(bias)
    y2 = out.view(-1, cols)
    key = (x2.shape, x2.stride(0), x.dtype, x.device)
    plan = _PLANS.get(key)
    if plan is None:
        if len(_PLANS) >= MAX_PLANS:
            _PLANS.clear()
        plan = _PLANS[key] = launch_plan(x2.shape[0], cols, x2.element_size(), CONFIG, x.device)
    kernels, grid, block, *extra, shared = plan
    kernels[x.dtype](grid, block, x2, w, b, y2, x2.shape[0], cols, x2.stride(0), cols,
                     float(eps), *extra, shared=shared)  # fmt: skip
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


def launch_plan(rows: int, cols: int, size: int, config: dict, device: torch.device) -> tuple:
    """(kernels, grid, block, *arguments, shared bytes): the wide path's, or rows_plan's for rows
    it holds in registers, rows past WIDE_ITEMS slots, or weight and bias past shared memory."""
    p = torch.cuda.get_device_properties(device)  # SMs, and the shared memory a block may opt into
    vec, g = 16 // size, config["WIDE_THREADS"]
    nvec = -(-cols // vec) + (cols % vec != 0)
    shared = 2 * -(-cols // vec) * 16  # the weight's vectors, then the bias's
    narrow = nvec <= config["MAX_THREADS"] * config["ITEMS"]  # the narrow path's registers
    full = shared + 1024 > p.shared_memory_per_block_optin  # 1 KB: red[] and some slack
    if narrow or nvec > g * config["WIDE_ITEMS"] or full:
        return (_KERNELS, *rows_plan(rows, cols, size, config))
    return _WIDE, min(rows, p.multi_processor_count), g, shared


def _fresh(t: torch.Tensor) -> torch.Tensor:
    """A contiguous copy of t in a new allocation (16-byte aligned, as torch's always are)."""
    out = torch.empty(t.shape, dtype=t.dtype, device=t.device)
    out.copy_(t)
    return out


def _pow2(n: int) -> int:
    return 1 << (n - 1).bit_length() if n > 1 else 1
