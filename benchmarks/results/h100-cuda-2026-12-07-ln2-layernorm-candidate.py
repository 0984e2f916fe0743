"""LayerNorm in CUDA C++ over the last dim (biased variance), any leading dims flattened to
rows; statistics in fp32, one cast when storing. Rows are walked in 16-byte vectors from the
16-byte boundary at or before their start, so an odd width (50257) still moves 128-bit loads
and stores; a row's first and last vectors are partial (masked). Weight and bias are read at
the row's offset from a 16-byte boundary: two aligned vectors, shifted at compile time. Mean,
then the variance about it (exact where E[x^2] - E[x]^2 cancels), then the output; sums are
shuffles and a shared-memory step in a fixed order (bitwise deterministic).
Narrow path: G threads a row (a slice of a warp, or the block); thread t owns vectors t, t + G,
...: ITEMS in registers, the next in shared memory (SMEM_KB a block), the rest read again.
Wide path: one block an SM loops over rows, the weight and bias of its columns in shared memory
(loaded once), the row in registers, while cp.async stages the next row in shared memory. Where
one SM cannot hold all three (bf16 past ~38K columns), a cluster of two blocks on two SMs splits
the columns and adds its sums through distributed shared memory. 4096x50257 bf16 ran at 49 % of
copy narrow, 67 % wide without the stage (weight and bias filled shared memory).
"""

import torch

from autokernel.cuda_build import load

KERNEL_TYPE = "layernorm"
BACKEND = "cuda"
# Tunables; the builder passes each as a -D define, and kernel_fn reads them for the launch.
# ITEMS: 16-byte vectors a thread keeps in registers; MAX_THREADS: most threads on one row;
# NARROW_BLOCK: block size when a row needs a warp or less; SMEM_KB: shared memory a block may
# use for the slots of its row beyond the registers. Rows that would need those take the wide
# path: WIDE_THREADS a block, WIDE_ITEMS register slots a thread for a row (half on a cluster),
# a row split over at most WIDE_CLUSTER blocks (1 or 2).
CONFIG = {"ITEMS": 6, "MAX_THREADS": 512, "NARROW_BLOCK": 256, "SMEM_KB": 96,
          "WIDE_THREADS": 1024, "WIDE_ITEMS": 7, "WIDE_CLUSTER": 2}  # fmt: skip
SEARCH_SPACE = {"ITEMS": [2, 4, 6, 8], "MAX_THREADS": [128, 256, 512, 1024],
                "NARROW_BLOCK": [64, 128, 256, 512], "SMEM_KB": [0, 48, 96, 192],
                "WIDE_THREADS": [512, 1024], "WIDE_ITEMS": [4, 7, 13, 16],
                "WIDE_CLUSTER": [1, 2]}  # fmt: skip

CUDA_SOURCE = r"""
#include <cuda_fp16.h>
#include <cuda_bf16.h>
#include <type_traits>
// The narrow path's larger block size, and room for 1024 / BOUND blocks: a cap of 64 registers
// a thread (the 64K-register file over 1024 threads), two 512-thread rows an SM at once.
#define BOUND (MAX_THREADS > NARROW_BLOCK ? MAX_THREADS : NARROW_BLOCK)
#define MIN_BLOCKS (1024 / BOUND)
// A 16-byte vector of T as VEC floats and back, as a uint4: one 128-bit load or store (a struct
// of 8 bf16 filled element by element became eight 2-byte stores). at(w, q): element q of w.
#define DI __device__ __forceinline__
#define DEV static DI
template <typename H2> DEV unsigned bits(H2 h) { return *reinterpret_cast<const unsigned*>(&h); }
template <typename T> struct Cvt {  // fp16 and bf16: element q is half a word
  static constexpr int VEC = 8;
  static constexpr bool BF = std::is_same<T, __nv_bfloat16>::value;
  DEV float at(const unsigned* w, int q) {
    const unsigned h = q % 2 ? w[q / 2] >> 16 : w[q / 2] & 0xffffu;
    return BF ? __uint_as_float(h << 16) : __half2float(__ushort_as_half((unsigned short)h));
  }
  DEV unsigned two(float a, float b) {  // a low
    return BF ? bits(__floats2bfloat162_rn(a, b)) : bits(__floats2half2_rn(a, b));
  }
  DEV uint4 pack(const float* f) {
    return make_uint4(two(f[0], f[1]), two(f[2], f[3]), two(f[4], f[5]), two(f[6], f[7]));
  }
  DEV T from(float v) { return T(v); }  // round to nearest even, as __float2half_rn
};
template <> struct Cvt<float> {
  static constexpr int VEC = 4;
  DEV float at(const unsigned* w, int q) { return __uint_as_float(w[q]); }
  DEV uint4 pack(const float* f) {
    return make_uint4(bits(f[0]), bits(f[1]), bits(f[2]), bits(f[3]));
  }
  DEV float from(float v) { return v; }
};
template <typename T> DI void unpack(const uint4& r, float* f) {
  const unsigned w[4] = {r.x, r.y, r.z, r.w};
#pragma unroll
  for (int j = 0; j < Cvt<T>::VEC; ++j) f[j] = Cvt<T>::at(w, j);
}
// Sum over a group of g lanes (g a power of two up to 32, aligned within the warp). Every lane
// of the warp takes part, rows past the end included, so the full mask holds.
DI float group_sum(float v, int g) {
  for (int off = g >> 1; off > 0; off >>= 1) v += __shfl_xor_sync(0xffffffffu, v, off);
  return v;
}
// f(vector, k) for each vector k of this thread's slots in order: slot s is vector t + s * g,
// in registers for s < ITEMS, in shared memory for the next smem_items, else loaded again.
// FIRST: loads them all (the registers' in flight at once) and fills registers and stash.
template <bool FIRST = false, typename F>
DI void each_slot(uint4 (&reg)[ITEMS], uint4* stash, int smem_items,
                  const uint4* __restrict__ xv, int nvec, int t, int g, F&& f) {
#pragma unroll
  for (int s = 0, k = t; s < ITEMS; ++s, k += g)
    if (FIRST && k < nvec) reg[s] = __ldg(xv + k);
#pragma unroll
  for (int s = 0, k = t; s < ITEMS; ++s, k += g)
    if (k < nvec) f(reg[s], k);
#pragma unroll 4
  for (int s = ITEMS, k = t + ITEMS * g; k < nvec; ++s, k += g) {
    const bool kept = s < ITEMS + smem_items;
    const uint4 v = FIRST || !kept ? __ldg(xv + k) : stash[(s - ITEMS) * g + t];
    if (FIRST && kept) stash[(s - ITEMS) * g + t] = v;
    f(v, k);
  }
}
// Sum of the in-row elements of vector k (columns k * VEC - mis + j), or (SQ) of their squared
// deviations from mean (a row of mean 10, std 0.1 keeps its digits: E[x^2] - E[x]^2 would not).
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
// Columns k * VEC - MIS + j of a parameter p: the last MIS elements of its aligned vector k - 1,
// then the first VEC - MIS of vector k, as 8 words (MIS a constant: the shift is register
// renaming; aligned vectors holding a column cannot fault). SMEM: vector q is at pv[q - off].
template <typename T, int MIS, bool SMEM>
DI void param_words(const uint4* __restrict__ pv, int k, int off, int cols, unsigned (&w)[8]) {
  constexpr int VEC = Cvt<T>::VEC;
  const uint4 lo = (MIS > 0 && k > 0) ? (SMEM ? pv[k - 1 - off] : __ldg(pv + k - 1)) : uint4{};
  const uint4 hi = (k * VEC < cols) ? (SMEM ? pv[k - off] : __ldg(pv + k)) : uint4{};
  w[0] = lo.x; w[1] = lo.y; w[2] = lo.z; w[3] = lo.w;
  w[4] = hi.x; w[5] = hi.y; w[6] = hi.z; w[7] = hi.w;
}
// y = (x - mean) * rstd * weight + bias for vector k of a row MIS elements past a 16-byte
// boundary: one 128-bit store when the vector lies in the row, else its in-row elements.
template <typename T, int MIS, bool SMEM = false>
DI void emit(const uint4& v, int k, int cols, float mean, float rstd,
             const uint4* __restrict__ wv, const uint4* __restrict__ bv, uint4* yv, T* yr,
             int off = 0) {
  constexpr int VEC = Cvt<T>::VEC;
  float f[VEC];
  unpack<T>(v, f);
  unsigned p[8];
  param_words<T, MIS, SMEM>(wv, k, off, cols, p);
#pragma unroll
  for (int j = 0; j < VEC; ++j) f[j] = (f[j] - mean) * rstd * Cvt<T>::at(p, VEC - MIS + j);
  param_words<T, MIS, SMEM>(bv, k, off, cols, p);
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
// f(m as a constant) for the run-time offset m (uniform over a row): the output pass is
// compiled once per offset, so the weight's shift is a compile-time one.
template <typename T, int MIS = 0, typename F> DI void with_mis(int mis, F&& f) {
  using M = std::integral_constant<int, MIS>;
  if constexpr (MIS < Cvt<T>::VEC) mis == MIS ? f(M()) : with_mis<T, MIS + 1>(mis, f);
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
// 16 bytes global -> shared, no register between. cp_wait completes the thread's own copies,
// visible to it alone: each thread reads back only what it staged.
DEV void cp16(uint4* dst, const uint4* src) {
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n" ::
               "r"((unsigned)__cvta_generic_to_shared(dst)), "l"(src) : "memory");
}
DEV void cp_wait() { asm volatile("cp.async.wait_all;\n" ::: "memory"); }
// A cluster barrier (release, acquire): shared-memory writes before it are seen by all after.
DEV void cluster_sync() { __cluster_barrier_arrive(); __cluster_barrier_wait(); }
DEV float ld_rank(const float* p, unsigned rank) {  // *p in cluster block rank's shared memory
  unsigned a = (unsigned)__cvta_generic_to_shared(p);  // 32-bit: a generic one cost spills
  float v;
  asm volatile("mapa.shared::cluster.u32 %0, %0, %2;\n"
               "ld.shared::cluster.f32 %1, [%0];\n" : "+r"(a), "=f"(v) : "r"(rank) : "memory");
  return v;
}
// Sum over the CL blocks of a cluster (CL = 1: the block): warp totals into red, a barrier,
// then every thread adds them in one order (block 0's warps, then 1's): the same bits in all.
// A row's two sums use red[0], red[1]: rewritten only after a barrier all its readers passed.
template <int CL = 1> DI float block_sum(float v, float* red) {
  v = group_sum(v, 32);
  const int lane = threadIdx.x & 31;
  if (lane == 0) red[threadIdx.x >> 5] = v;
  if constexpr (CL > 1) cluster_sync(); else __syncthreads();
  float s = 0.f;
#pragma unroll
  for (int r = 0; r < CL; ++r)
    if (lane < (int)(blockDim.x >> 5)) s += CL > 1 ? ld_rank(red + lane, r) : red[lane];
  return group_sum(s, 32);
}

template <typename T>
DI void layernorm_rows(const T* __restrict__ x, const T* __restrict__ w, const T* __restrict__ b,
                       T* __restrict__ y, long long rows, int cols, long long xs, long long ys,
                       float eps, int g, int smem_items) {
  extern __shared__ uint4 stash[];  // slots ITEMS .. ITEMS + smem_items - 1 of every thread
  __shared__ float red[2][32];
  const long long row = (long long)blockIdx.x * (blockDim.x / g) + threadIdx.x / g;
  const int t = threadIdx.x % g;
  const RowAt<T> r(x, row, rows, xs, cols);
  // x's and y's rows sit at the same offset from a 16-byte boundary (kernel_fn makes sure).
  T* yr = y + (row < rows ? row : 0) * ys;
  uint4* yv = reinterpret_cast<uint4*>(yr - r.mis);
  uint4 reg[ITEMS];
  float acc = 0.f;  // pass 1, the mean
  each_slot<true>(reg, stash, smem_items, r.xv, r.nvec, t, g,
                  [&](const uint4& v, int k) { acc += vec_sum<T>(v, k, r.mis, cols); });
  const float mean = (g <= 32 ? group_sum(acc, g) : block_sum(acc, red[0])) / (float)cols;
  // Pass 2, the biased variance; a thread reads back only the stash slots it wrote.
  acc = 0.f;
  each_slot(reg, stash, smem_items, r.xv, r.nvec, t, g,
            [&](const uint4& v, int k) { acc += vec_sum<T, true>(v, k, r.mis, cols, mean); });
  const float rstd = rsqrtf((g <= 32 ? group_sum(acc, g) : block_sum(acc, red[1])) / cols + eps);
  const uint4 *wv = reinterpret_cast<const uint4*>(w), *bv = reinterpret_cast<const uint4*>(b);
  with_mis<T>(r.mis, [&](auto m) {
    each_slot(reg, stash, smem_items, r.xv, r.nvec, t, g, [&](const uint4& v, int k) {
      emit<T, decltype(m)::value>(v, k, cols, mean, rstd, wv, bv, yv, yr);
    });
  });
}

// The wide path (docstring): block `rank` of a cluster owns a row's vectors base = rank * part
// on, slot s of thread t being base + t + s * g; in shared memory, weight and bias vectors
// base - 1 .. base + part - 1 (emit reads k - 1 and k), then the stage for the next row.
template <int CL, typename T>
DI void layernorm_wide(const T* __restrict__ x, const T* __restrict__ w, const T* __restrict__ b,
                       T* __restrict__ y, long long rows, int cols, long long xs, long long ys,
                       float eps, int part) {
  constexpr int VEC = Cvt<T>::VEC, g = WIDE_THREADS, SLOTS = (WIDE_ITEMS + CL - 1) / CL;
  extern __shared__ uint4 smem[];
  __shared__ float red[2][32];
  const int t = threadIdx.x, nw = (cols + VEC - 1) / VEC, base = (int)(blockIdx.x % CL) * part;
  uint4 *wsm = smem, *bsm = smem + part + 1, *stage = smem + 2 * (part + 1);
  const uint4 *wv = reinterpret_cast<const uint4*>(w), *bv = reinterpret_cast<const uint4*>(b);
  for (int i = t, q = base - 1 + t; i <= part; i += g, q += g)
    if (q >= 0 && q < nw) cp16(wsm + i, wv + q), cp16(bsm + i, bv + q);
  auto each = [&](int nvec, auto&& f) {  // f(slot, index in the stage) of a row's nvec vectors
#pragma unroll
    for (int s = 0, j = t; s < SLOTS; ++s, j += g)
      if (j < part && base + j < nvec) f(s, j);
  };
  auto fetch = [&](const RowAt<T>& r) {
    each(r.nvec, [&](int, int j) { cp16(stage + j, r.xv + base + j); });
  };
  const long long step = gridDim.x / CL;  // both blocks of a cluster take the same rows
  long long row = blockIdx.x / CL;
  RowAt<T> nx(x, row, rows, xs, cols);
  fetch(nx);
  cp_wait();
  __syncthreads();  // the parameters, each thread's share, for all
  uint4 reg[SLOTS];
  for (; row < rows; row += step) {
    const RowAt<T> cur = nx;
    nx = RowAt<T>(x, row + step, rows, xs, cols);
    cp_wait();
    float acc = 0.f;
    each(cur.nvec, [&](int s, int j) {
      acc += vec_sum<T>(reg[s] = stage[j], base + j, cur.mis, cols);
    });
    fetch(nx);  // the next row, into slots whose values the sum above has read
    const float mean = block_sum<CL>(acc, red[0]) / (float)cols;
    acc = 0.f;
    each(cur.nvec, [&](int s, int j) {
      acc += vec_sum<T, true>(reg[s], base + j, cur.mis, cols, mean);
    });
    const float rstd = rsqrtf(block_sum<CL>(acc, red[1]) / (float)cols + eps);
    T* yr = y + row * ys;
    uint4* yv = reinterpret_cast<uint4*>(yr - cur.mis);
    with_mis<T>(cur.mis, [&](auto m) {
      each(cur.nvec, [&](int s, int j) {
        emit<T, decltype(m)::value, true>(reg[s], base + j, cols, mean, rstd, wsm, bsm, yv, yr,
                                          base - 1);
      });
    });
  }
  if constexpr (CL > 1) cluster_sync();  // the other block may still read this one's red
}

// Entry points (parameter lists written out: the launcher reads them unpreprocessed), each for
// dtype 0 fp16, 1 bf16, 2 fp32 (a uniform branch); wide: a block (w1) or cluster of 2 a row.
template <typename F> DI void by_dtype(int dtype, F&& f) {
  if (dtype == 0) f(__half()); else if (dtype == 1) f(__nv_bfloat16()); else f(0.f);
}
#define AS(z) (const decltype(z)*)x, (const decltype(z)*)w, (const decltype(z)*)b, (decltype(z)*)y
extern "C" __global__ void __launch_bounds__(BOUND, MIN_BLOCKS) layernorm_rows_k(
    const void* x, const void* w, const void* b, void* y, long long rows, int cols, long long xs,
    long long ys, float eps, int g, int smem_items, int dtype) {
  by_dtype(dtype, [&](auto z) { layernorm_rows(AS(z), rows, cols, xs, ys, eps, g, smem_items); });
}
extern "C" __global__ void __launch_bounds__(WIDE_THREADS, 1) layernorm_w1(
    const void* x, const void* w, const void* b, void* y, long long rows, int cols, long long xs,
    long long ys, float eps, int part, int dtype) {
  by_dtype(dtype, [&](auto z) { layernorm_wide<1>(AS(z), rows, cols, xs, ys, eps, part); });
}
extern "C" __global__ void __launch_bounds__(WIDE_THREADS, 1) __cluster_dims__(2, 1, 1)
layernorm_w2(const void* x, const void* w, const void* b, void* y, long long rows, int cols,
    long long xs, long long ys, float eps, int part, int dtype) {
  by_dtype(dtype, [&](auto z) { layernorm_wide<2>(AS(z), rows, cols, xs, ys, eps, part); });
}
"""

_MOD = load(CUDA_SOURCE, CONFIG)
_ROWS, _WIDE = _MOD.layernorm_rows_k, {1: _MOD.layernorm_w1, 2: _MOD.layernorm_w2}
_DTYPES = {torch.float16: 0, torch.bfloat16: 1, torch.float32: 2}  # the kernels' dtype codes
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
    kernel, grid, block, *extra, shared = plan
    kernel(grid, block, x2, w, b, y2, x2.shape[0], cols, x2.stride(0), cols, float(eps), *extra,
           _DTYPES[x.dtype], shared=shared)  # fmt: skip
    return out


def rows_plan(rows: int, cols: int, size: int, config: dict) -> tuple[int, int, int, int, int]:
    """(grid, block, threads per row g, shared-memory slots per thread, shared bytes). g: enough
    threads that ITEMS vectors each cover the row (one more where a row may start inside a
    vector), a power of two up to MAX_THREADS. Past 32 a row takes the whole block; below,
    NARROW_BLOCK // g rows share one. Slots past ITEMS go to shared memory up to SMEM_KB."""
    vec = 16 // size
    nvec = -(-cols // vec) + (cols % vec != 0)  # x's base is 16-byte aligned (kernel_fn)
    g = min(_pow2(-(-nvec // config["ITEMS"])), config["MAX_THREADS"])
    # past 32 a row takes the block; below, rows share one no larger than they need
    block = g if g > 32 else max(32, min(config["NARROW_BLOCK"], 32 * _pow2(-(-rows * g // 32))))
    slots = -(-nvec // g)
    smem_items = min(max(slots - config["ITEMS"], 0), config["SMEM_KB"] * 1024 // (16 * g))
    if g <= 32:
        smem_items = 0  # a narrow row fits in registers (g * ITEMS >= nvec)
    return -(-rows // (block // g)), block, g, smem_items, smem_items * g * 16


def launch_plan(rows: int, cols: int, size: int, config: dict, device: torch.device) -> tuple:
    """(kernel, grid, block, *arguments, shared bytes): rows_plan's for rows the narrow path
    holds in registers, else the wide path on the fewest blocks a row (1, or a cluster of 2 up
    to WIDE_CLUSTER) whose part fits its slots (WIDE_ITEMS / blocks) and shared memory (weight,
    bias, one vector more each, and the stage: 3 * part + 2), else rows_plan's (fp32 50257)."""
    p = torch.cuda.get_device_properties(device)  # SMs, and the shared memory a block may opt into
    vec, g = 16 // size, config["WIDE_THREADS"]
    nvec = -(-cols // vec) + (cols % vec != 0)
    if nvec > config["MAX_THREADS"] * config["ITEMS"]:  # past the narrow path's registers
        for cl in range(1, min(config["WIDE_CLUSTER"], 2) + 1):
            part = -(-nvec // cl)
            shared = (3 * part + 2) * 16
            fits = shared + 1024 <= p.shared_memory_per_block_optin  # 1 KB: red[] and slack
            if fits and -(-part // g) <= -(-config["WIDE_ITEMS"] // cl):
                clusters = min(rows, p.multi_processor_count // cl)  # one block an SM
                return _WIDE[cl], clusters * cl, g, part, shared
    return (_ROWS, *rows_plan(rows, cols, size, config))


def _fresh(t: torch.Tensor) -> torch.Tensor:
    """A contiguous copy of t in a new allocation (16-byte aligned, as torch's always are)."""
    out = torch.empty(t.shape, dtype=t.dtype, device=t.device)
    out.copy_(t)
    return out


def _pow2(n: int) -> int:
    return 1 << (n - 1).bit_length() if n > 1 else 1
