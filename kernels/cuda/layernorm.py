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
Longer rows take the wide path: one block of WIDE_THREADS an SM loops over rows, the row in
registers, while cp.async stages the next one (WIDE_STAGES ahead) in shared memory; weight and
bias sit in shared memory (loaded once) as far as they fit beside the stage, the rest is read
from L2 for every row (WIDE_PARAMS: the most kept). At 4096x50257 bf16 that is the weight (100
KB) and the stage (100 KB); the bias comes from L2 one slot ahead of its use, one load a vector
(the lane below's vector by shuffle). Before: 49 % of copy narrow (weight and bias from L2 and
the row's tail re-read), 67 % wide with both in shared memory and no room to stage, so every
row waited on its loads; a 2-block cluster with the row split ran at 61 % (two cluster
barriers a row, each SM's fixed costs over half the bytes). A row too wide for the stage beside
one parameter whose weight and bias still fit (bf16 about 56,950 to 57,344 columns) keeps that
wide path without the stage, kernel and plan as before it (wide_path).
"""

import torch

from autokernel.cuda_build import load

KERNEL_TYPE = "layernorm"
BACKEND = "cuda"
# Tunables; the builder passes each as a -D define, and kernel_fn reads them for the launch.
# ITEMS: 16-byte vectors a thread keeps in registers; MAX_THREADS: most threads on one row;
# NARROW_BLOCK: block size when a row needs a warp or less; SMEM_KB: shared memory a block may
# use for the slots of its row beyond the registers. Rows that would need those take the wide
# path: WIDE_THREADS a block, one block an SM, WIDE_ITEMS register slots a thread, WIDE_STAGES
# rows staged ahead, at most WIDE_PARAMS of weight and bias (in that order) in shared memory.
CONFIG = {"ITEMS": 4, "MAX_THREADS": 512, "NARROW_BLOCK": 256, "SMEM_KB": 96,
          "WIDE_THREADS": 1024, "WIDE_ITEMS": 7, "WIDE_STAGES": 1, "WIDE_PARAMS": 2}  # fmt: skip
SEARCH_SPACE = {"ITEMS": [2, 4, 6, 8], "MAX_THREADS": [128, 256, 512, 1024],
                "NARROW_BLOCK": [64, 128, 256, 512], "SMEM_KB": [0, 48, 96, 192],
                "WIDE_THREADS": [512, 1024], "WIDE_ITEMS": [4, 7, 13, 16],
                "WIDE_STAGES": [1, 2], "WIDE_PARAMS": [0, 1, 2]}  # fmt: skip

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

// The wide path with no stage (main's before it, kept word for word): weight and bias both in
// shared memory, the row loaded into registers. Rows whose stage does not fit beside one
// parameter but whose weight and bias do fit take it (launch_plan); g is the block as a
// constant, so slot offsets are immediates.
template <typename T>
DI void layernorm_wide_flat(const T* __restrict__ x, const T* __restrict__ w,
                            const T* __restrict__ b, T* __restrict__ y, long long rows,
                            int cols, long long xs, long long ys, float eps) {
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

// 16 bytes global -> shared with no register between (cp.async), in groups: cp_wait<N> waits
// until at most N of the thread's groups are in flight; what they wrote is visible to the thread
// alone (each reads back only what it staged; a barrier shares the parameters).
DEV void cp16(uint4* dst, const uint4* src) {
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n" ::
               "r"((unsigned)__cvta_generic_to_shared(dst)), "l"(src) : "memory");
}
DEV void cp_commit() { asm volatile("cp.async.commit_group;\n" ::: "memory"); }
template <int N> DEV void cp_wait() {
  asm volatile("cp.async.wait_group %0;\n" ::"n"(N) : "memory");
}

// Sum over the block as block_sum, into its own red (no barrier before: the caller alternates
// two, each rewritten only after a barrier that every reader of its last sum has passed).
DI float block_sum2(float v, float* red) {
  v = group_sum(v, 32);
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  if (lane == 0) red[warp] = v;
  __syncthreads();
  v = lane < (int)(blockDim.x >> 5) ? red[lane] : 0.f;
  return group_sum(v, 32);
}

// A parameter's words for vector k (as param_words) on the wide path, called by every lane:
// SMEM, both aligned vectors from its copy in shared memory (a lane past the row reads at most
// WIDE_THREADS vectors past the parameter: still inside the stage, launch_plan makes sure);
// else hi = p[k] as loaded from L2 by the caller (zero past the parameter), lo = p[k - 1] the
// lane below's hi, lane 0's from halo[k / 32] (p[k - 1] for each k a multiple of 32, in shared
// memory): one L2 load a vector, not two.
template <typename T, int MIS, bool SMEM>
DI void wide_words(const uint4* pv, const uint4& hi_l2, int k, int nw, int cols,
                   unsigned (&w)[8]) {
  if constexpr (SMEM) {
    param_words<T, MIS, true>(pv, k, cols, w);
  } else {
    const uint4 hi = hi_l2;
    uint4 lo = make_uint4(0u, 0u, 0u, 0u);
    if constexpr (MIS > 0) {
      lo.x = __shfl_up_sync(0xffffffffu, hi.x, 1);
      lo.y = __shfl_up_sync(0xffffffffu, hi.y, 1);
      lo.z = __shfl_up_sync(0xffffffffu, hi.z, 1);
      lo.w = __shfl_up_sync(0xffffffffu, hi.w, 1);
      if ((threadIdx.x & 31) == 0) lo = k > 0 && k <= nw ? pv[k >> 5] : make_uint4(0, 0, 0, 0);
    }
    w[0] = lo.x; w[1] = lo.y; w[2] = lo.z; w[3] = lo.w;
    w[4] = hi.x; w[5] = hi.y; w[6] = hi.z; w[7] = hi.w;
  }
}

// y = (x - mean) * rstd * weight + bias for vector k, the parameters' words given: the same
// arithmetic as emit.
template <typename T, int MIS>
DI void emit_words(const uint4& v, int k, int cols, float mean, float rstd,
                   const unsigned (&pw)[8], const unsigned (&pb)[8], uint4* yv, T* yr) {
  constexpr int VEC = Cvt<T>::VEC;
  float f[VEC];
  unpack<T>(v, f);
#pragma unroll
  for (int j = 0; j < VEC; ++j) f[j] = (f[j] - mean) * rstd * Cvt<T>::at(pw, VEC - MIS + j);
#pragma unroll
  for (int j = 0; j < VEC; ++j) f[j] += Cvt<T>::at(pb, VEC - MIS + j);
  const int e0 = k * VEC - MIS;
  if (e0 >= 0 && e0 + VEC <= cols) {
    yv[k] = Cvt<T>::pack(f);
  } else {
#pragma unroll
    for (int j = 0; j < VEC; ++j)
      if (e0 + j >= 0 && e0 + j < cols) yr[e0 + j] = Cvt<T>::from(f[j]);
  }
}

// The wide path (docstring). NP: how many of weight and bias sit in shared memory (the first
// NP of them); the others are read from L2 for every row, one slot ahead of their use. Shared
// memory: the NP parameters (nw vectors each), a halo of nh vectors for each other one, then
// WIDE_STAGES stages of nw + 1 vectors (a row spans at most nw + 1), stage i for rows i, i + S,
// ... of the block's. g is the block as a constant, so slot offsets are immediates.
template <typename T, int NP>
DI void layernorm_wide(const T* __restrict__ x, const T* __restrict__ w, const T* __restrict__ b,
                       T* __restrict__ y, long long rows, int cols, long long xs, long long ys,
                       float eps) {
  constexpr int VEC = Cvt<T>::VEC, g = WIDE_THREADS, S = WIDE_STAGES;
  extern __shared__ uint4 smem[];
  __shared__ float red[2][32];
  const int t = threadIdx.x, nw = (cols + VEC - 1) / VEC, nh = nw / 32 + 1;
  const uint4 *wv = reinterpret_cast<const uint4*>(w), *bv = reinterpret_cast<const uint4*>(b);
  // weight: in shared memory (NP >= 1) or its halo; bias: likewise (NP == 2) or its halo
  const uint4* wsm = smem;
  const uint4* bsm = NP == 2 ? smem + nw : smem + NP * nw + (NP == 0 ? nh : 0);
  uint4* stage = smem + NP * nw + (2 - NP) * nh;
  for (int k = t; k < NP * nw; k += g) cp16(smem + k, k < nw ? wv + k : bv + (k - nw));
  for (int j = t; j < (2 - NP) * nh; j += g) {  // halo j % nh: vector 32 (j % nh) - 1
    const int q = 32 * (j % nh) - 1;
    if (q >= 0 && q < nw) cp16(smem + NP * nw + j, (NP == 0 && j < nh ? wv : bv) + q);
  }
  const long long step = gridDim.x;
  auto fetch = [&](long long row, uint4* buf) {  // a row into a stage, slot s at t + s * g
    const RowAt<T> r(x, row, rows, xs, cols);
#pragma unroll
    for (int s = 0, k = t; s < WIDE_ITEMS; ++s, k += g) if (k < r.nvec) cp16(buf + k, r.xv + k);
    cp_commit();
  };
#pragma unroll
  for (int i = 0; i < S; ++i) fetch(blockIdx.x + i * step, stage + i * (nw + 1));
  cp_wait<S - 1>();
  __syncthreads();  // the parameters and halos, each thread's share, for all
  uint4 reg[WIDE_ITEMS];
  int i = 0;
  for (long long row = blockIdx.x; row < rows; row += step) {
    const RowAt<T> cur(x, row, rows, xs, cols);
    uint4* buf = stage + i * (nw + 1);
    cp_wait<S - 1>();  // this row's group (one a row, committed in order)
    float acc = 0.f;
#pragma unroll
    for (int s = 0, k = t; s < WIDE_ITEMS; ++s, k += g)
      if (k < cur.nvec) acc += vec_sum<T>(reg[s] = buf[k], k, cur.mis, cols);
    fetch(row + S * step, buf);  // S rows ahead, into the slots the sum above has read
    i = i + 1 == S ? 0 : i + 1;
    const float mean = block_sum2(acc, red[0]) / (float)cols;
    // An L2 bias: slot 0's flies during the variance.
    const uint4 zero = make_uint4(0u, 0u, 0u, 0u);
    uint4 bh = zero;
    if (NP == 1 && t < nw) bh = __ldg(bv + t);
    acc = 0.f;
#pragma unroll
    for (int s = 0, k = t; s < WIDE_ITEMS; ++s, k += g)
      if (k < cur.nvec) acc += vec_sum<T, true>(reg[s], k, cur.mis, cols, mean);
    const float rstd = rsqrtf(block_sum2(acc, red[1]) / (float)cols + eps);
    T* yr = y + row * ys;
    uint4* yv = reinterpret_cast<uint4*>(yr - cur.mis);
    with_mis<T>(cur.mis, [&](auto m) {
      constexpr int MIS = decltype(m)::value;
#pragma unroll
      for (int s = 0, k = t; s < WIDE_ITEMS; ++s, k += g) {
        if (s * g >= cur.nvec) break;  // the block's last slot (uniform: shuffles stay whole)
        // The next slot's L2 bias; an L2 weight (NP 0) is read here, not ahead (it spilt).
        const uint4 wc = NP < 1 && k < nw ? __ldg(wv + k) : zero;
        uint4 bc = bh;
        if (NP == 1 && s + 1 < WIDE_ITEMS) bh = k + g < nw ? __ldg(bv + k + g) : zero;
        if (NP == 0) bc = k < nw ? __ldg(bv + k) : zero;
        unsigned pw[8], pb[8];
        wide_words<T, MIS, (NP >= 1)>(wsm, wc, k, nw, cols, pw);
        wide_words<T, MIS, (NP >= 2)>(bsm, bc, k, nw, cols, pb);
        if (k < cur.nvec) emit_words<T, MIS>(reg[s], k, cols, mean, rstd, pw, pb, yv, yr);
      }
    });
  }
}

// Entry points (parameter lists written out: the launcher reads them unpreprocessed). The
// wide path with both parameters from L2 (NP 0) is built with two stages only (launch_plan):
// with one it spilt registers, and one parameter fits beside one stage up to 56936 bf16.
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
extern "C" __global__ void __launch_bounds__(WIDE_THREADS, 1) layernorm_wide0_f16(
    const __half* x, const __half* w, const __half* b, __half* y, long long rows, int cols,
    long long xs, long long ys, float eps) {
  if constexpr (WIDE_STAGES > 1) layernorm_wide<__half, 0>(x, w, b, y, rows, cols, xs, ys, eps);
}
extern "C" __global__ void __launch_bounds__(WIDE_THREADS, 1) layernorm_wide0_bf16(
    const __nv_bfloat16* x, const __nv_bfloat16* w, const __nv_bfloat16* b, __nv_bfloat16* y,
    long long rows, int cols, long long xs, long long ys, float eps) {
  if constexpr (WIDE_STAGES > 1)
    layernorm_wide<__nv_bfloat16, 0>(x, w, b, y, rows, cols, xs, ys, eps);
}
extern "C" __global__ void __launch_bounds__(WIDE_THREADS, 1) layernorm_wide0_f32(
    const float* x, const float* w, const float* b, float* y, long long rows, int cols,
    long long xs, long long ys, float eps) {
  if constexpr (WIDE_STAGES > 1) layernorm_wide<float, 0>(x, w, b, y, rows, cols, xs, ys, eps);
}
extern "C" __global__ void __launch_bounds__(WIDE_THREADS, 1) layernorm_wide1_f16(
    const __half* x, const __half* w, const __half* b, __half* y, long long rows, int cols,
    long long xs, long long ys, float eps) {
  layernorm_wide<__half, 1>(x, w, b, y, rows, cols, xs, ys, eps);
}
extern "C" __global__ void __launch_bounds__(WIDE_THREADS, 1) layernorm_wide1_bf16(
    const __nv_bfloat16* x, const __nv_bfloat16* w, const __nv_bfloat16* b, __nv_bfloat16* y,
    long long rows, int cols, long long xs, long long ys, float eps) {
  layernorm_wide<__nv_bfloat16, 1>(x, w, b, y, rows, cols, xs, ys, eps);
}
extern "C" __global__ void __launch_bounds__(WIDE_THREADS, 1) layernorm_wide1_f32(
    const float* x, const float* w, const float* b, float* y, long long rows, int cols,
    long long xs, long long ys, float eps) {
  layernorm_wide<float, 1>(x, w, b, y, rows, cols, xs, ys, eps);
}
extern "C" __global__ void __launch_bounds__(WIDE_THREADS, 1) layernorm_wide2_f16(
    const __half* x, const __half* w, const __half* b, __half* y, long long rows, int cols,
    long long xs, long long ys, float eps) {
  layernorm_wide<__half, 2>(x, w, b, y, rows, cols, xs, ys, eps);
}
extern "C" __global__ void __launch_bounds__(WIDE_THREADS, 1) layernorm_wide2_bf16(
    const __nv_bfloat16* x, const __nv_bfloat16* w, const __nv_bfloat16* b, __nv_bfloat16* y,
    long long rows, int cols, long long xs, long long ys, float eps) {
  layernorm_wide<__nv_bfloat16, 2>(x, w, b, y, rows, cols, xs, ys, eps);
}
extern "C" __global__ void __launch_bounds__(WIDE_THREADS, 1) layernorm_wide2_f32(
    const float* x, const float* w, const float* b, float* y, long long rows, int cols,
    long long xs, long long ys, float eps) {
  layernorm_wide<float, 2>(x, w, b, y, rows, cols, xs, ys, eps);
}
extern "C" __global__ void __launch_bounds__(WIDE_THREADS, 1) layernorm_wide_f16(
    const __half* x, const __half* w, const __half* b, __half* y, long long rows, int cols,
    long long xs, long long ys, float eps) {
  layernorm_wide_flat<__half>(x, w, b, y, rows, cols, xs, ys, eps);
}
extern "C" __global__ void __launch_bounds__(WIDE_THREADS, 1) layernorm_wide_bf16(
    const __nv_bfloat16* x, const __nv_bfloat16* w, const __nv_bfloat16* b, __nv_bfloat16* y,
    long long rows, int cols, long long xs, long long ys, float eps) {
  layernorm_wide_flat<__nv_bfloat16>(x, w, b, y, rows, cols, xs, ys, eps);
}
extern "C" __global__ void __launch_bounds__(WIDE_THREADS, 1) layernorm_wide_f32(
    const float* x, const float* w, const float* b, float* y, long long rows, int cols,
    long long xs, long long ys, float eps) {
  layernorm_wide_flat<float>(x, w, b, y, rows, cols, xs, ys, eps);
}
"""

_MOD = load(CUDA_SOURCE, CONFIG)
_KERNELS = {torch.float16: _MOD.layernorm_f16, torch.bfloat16: _MOD.layernorm_bf16,
            torch.float32: _MOD.layernorm_f32}  # fmt: skip
_FLAT = {torch.float16: _MOD.layernorm_wide_f16, torch.bfloat16: _MOD.layernorm_wide_bf16,
         torch.float32: _MOD.layernorm_wide_f32}  # fmt: skip
# The wide path's kernels by how many of weight and bias they keep in shared memory, by dtype.
_WIDE = {0: {torch.float16: _MOD.layernorm_wide0_f16, torch.bfloat16: _MOD.layernorm_wide0_bf16,
             torch.float32: _MOD.layernorm_wide0_f32},
         1: {torch.float16: _MOD.layernorm_wide1_f16, torch.bfloat16: _MOD.layernorm_wide1_bf16,
             torch.float32: _MOD.layernorm_wide1_f32},
         2: {torch.float16: _MOD.layernorm_wide2_f16, torch.bfloat16: _MOD.layernorm_wide2_bf16,
             torch.float32: _MOD.layernorm_wide2_f32}}  # fmt: skip
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
    """(kernels, grid, block, *arguments, shared bytes) for the path wide_path picks: the wide
    path's kernels (staged, or flat), one block an SM, or rows_plan's."""
    p = torch.cuda.get_device_properties(device)  # SMs, and the shared memory a block may opt into
    path, shared = wide_path(cols, size, config, p.shared_memory_per_block_optin)
    if path == "rows":
        return (_KERNELS, *rows_plan(rows, cols, size, config))
    kernels = _FLAT if path == "flat" else _WIDE[int(path[-1])]
    return kernels, min(rows, p.multi_processor_count), config["WIDE_THREADS"], shared


def wide_path(cols: int, size: int, config: dict, optin: int) -> tuple[str, int]:
    """(path, shared bytes) for rows of cols elements of size bytes, optin the shared memory a
    block may opt into. "wide2", "wide1", "wide0": the staged wide path with that many of weight
    and bias in shared memory (up to WIDE_PARAMS), as many as fit beside the stages
    (wide_shared), for rows past the narrow path's registers, within WIDE_ITEMS slots and at
    least a vector a thread (a lane past the row reads weight and bias in shared memory at most
    WIDE_THREADS vectors past them). Else main's rule before the stage, unchanged: "flat" (the
    wide path with no stage, weight and bias in shared memory) where those fit, and "rows"
    (rows_plan) otherwise. So a row that the stage does not fit (bf16 from about 56,950 columns
    to 57,344 on sm_90) keeps the flat path, 67 % of copy, not rows_plan's 49 %."""
    vec, g = 16 // size, config["WIDE_THREADS"]
    nw = -(-cols // vec)
    nvec = nw + (cols % vec != 0)
    narrow = nvec <= config["MAX_THREADS"] * config["ITEMS"]  # the narrow path's registers
    if not narrow and nvec <= g * config["WIDE_ITEMS"] and nw >= g:
        least = 0 if config["WIDE_STAGES"] > 1 else 1  # NP 0 is built with two stages only
        for np in range(min(config["WIDE_PARAMS"], 2), least - 1, -1):
            shared = wide_shared(cols, size, np, config["WIDE_STAGES"])
            if shared + 1024 <= optin:  # 1 KB: red[] and some slack
                return f"wide{np}", shared
    shared = 2 * nw * 16  # the weight's vectors, then the bias's
    full = shared + 1024 > optin  # 1 KB: red[] and some slack
    if narrow or nvec > g * config["WIDE_ITEMS"] or full:
        return "rows", 0
    return "flat", shared


def wide_shared(cols: int, size: int, np: int, stages: int) -> int:
    """Shared bytes of the wide path (layernorm_wide): np parameters of nw vectors, a halo of
    nw // 32 + 1 vectors for each other one, stages of nw + 1 vectors."""
    nw = -(-cols // (16 // size))
    return (np * nw + (2 - np) * (nw // 32 + 1) + stages * (nw + 1)) * 16


def _fresh(t: torch.Tensor) -> torch.Tensor:
    """A contiguous copy of t in a new allocation (16-byte aligned, as torch's always are)."""
    out = torch.empty(t.shape, dtype=t.dtype, device=t.device)
    out.copy_(t)
    return out


def _pow2(n: int) -> int:
    return 1 << (n - 1).bit_length() if n > 1 else 1
