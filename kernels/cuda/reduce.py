"""Sum over the last dim in CUDA C++, any leading dims; fp32 accumulation, the result in the
input dtype.

Two paths. Narrow rows that fill their group exactly (8, 16 or 32 whole 16-byte vectors: 64, 128
or 256 bf16/fp16 columns, 32, 64 or 128 fp32, the base and the row stride whole vectors) take one
vector a lane: a group of G = 8, 16 or 32 lanes owns a row, so one warp load instruction covers
32 / G whole consecutive rows (512 contiguous bytes at 128 bf16), and each thread issues ROWS
such loads, one per row, before it adds anything: ROWS x 16 bytes in flight a thread (on the
lanes a row fills). The per-row sums then meet in a transposing shuffle tree (each exchange
halves the values a lane holds), so a warp's ROWS x 32 / G results come out on distinct lanes
and leave in one coalesced store. With PERSIST the grid is what the SMs hold at once, and every
warp walks its own equal run of rows (no second wave, no tail of late blocks). On an H200 at
262144x128 bf16: 77.6 % of copy before, 88.5 % with PERSIST, 90.6 % without (the default). Rows
that leave lanes idle stay on the other path, as before the narrow one: 262144x127 (off whole
vectors, a 32-lane group half idle) fell from 71.1 to 47.8 % on it, 1048576x32 (4 vectors in an
8-lane group) from 82.2 to 62.3 % (narrow_fits).

Other rows: a group of g threads owns one row, a slice of a warp or the whole block. Each thread
has ITEMS loads in flight per step.

Both paths walk a row in 16-byte vectors from the 16-byte boundary at or before its start, so
every row moves whole 128-bit loads whatever its width or offset (only the first and last vector
are masked). Each thread's sums, then the shuffle trees (and, on a wide row, one shared-memory
step across warps) add in a fixed order, with no atomics: the result is bitwise deterministic.
"""

import torch

from autokernel.cuda_build import load

KERNEL_TYPE = "reduce"
BACKEND = "cuda"
# Tunables; the builder passes each as a -D define, and kernel_fn reads them for the launch.
# ITEMS: 16-byte loads a thread has in flight per step on a wide row; MAX_THREADS: most threads
# on one row; NARROW_BLOCK: block size when a row needs a warp or less; ROWS: rows (one 16-byte
# load each) a thread has in flight on the narrow path; PERSIST: 1 = the narrow grid is what the
# SMs hold at once, each warp a run of rows; 0 = one ROWS-deep step of rows a warp;
# CACHE_HINT: 1 = narrow loads as ld.global.nc.L1::no_allocate.L2::256B (read once, streamed).
CONFIG = {
    "ITEMS": 8,
    "MAX_THREADS": 512,
    "NARROW_BLOCK": 256,
    "ROWS": 8,
    "PERSIST": 0,
    "CACHE_HINT": 1,
}
SEARCH_SPACE = {
    "ITEMS": [2, 4, 6, 8],
    "MAX_THREADS": [128, 256, 512, 1024],
    "NARROW_BLOCK": [64, 128, 256, 512],
    "ROWS": [2, 4, 8],
    "PERSIST": [0, 1],
    "CACHE_HINT": [0, 1],
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

// The narrow path's blocks hold NARROW_BLOCK threads, 1024 / NARROW_BLOCK of them an SM at the
// least: at most 64 registers a thread, room for ROWS (<= 8) vectors in flight and the sums.
#define NARROW_MIN (1024 / NARROW_BLOCK)

// One 16-byte vector loaded for a single use: the rows are read once, so with CACHE_HINT the
// load neither keeps the line in L1 nor asks L2 for less than 256 bytes of it.
__device__ __forceinline__ uint4 load_once(const uint4* p) {
#if CACHE_HINT
  uint4 r;
  asm("ld.global.nc.L1::no_allocate.L2::256B.v4.u32 {%0, %1, %2, %3}, [%4];"
      : "=r"(r.x), "=r"(r.y), "=r"(r.z), "=r"(r.w)
      : "l"(p));
  return r;
#else
  return __ldg(p);
#endif
}

// Narrow rows (at most G <= 32 vectors from the boundary at or before the start): G lanes a
// row, lane t holding vector t. The warp takes rows [start, end) in steps of ROWS * PER rows;
// in step row r (0..ROWS-1) its lanes read rows base + r * PER + sub, so every load instruction
// covers PER whole consecutive rows. All ROWS loads go out before any sum is taken. ALIGNED:
// the base and the row stride are whole vectors, so every row starts on a boundary (no per-row
// offset to work out, and only a last partial vector to mask).
template <typename T, int G, bool ALIGNED>
__device__ __forceinline__ void narrow_rows(const T* __restrict__ x, T* __restrict__ y,
                                            long long start, long long end, int cols,
                                            long long xs) {
  constexpr int VEC = Cvt<T>::VEC;
  constexpr int PER = 32 / G;  // rows a warp load instruction covers
  constexpr int HALVE = ROWS < G ? ROWS : G;  // exchanges that halve the values a lane holds
  constexpr int KEEP = ROWS / HALVE;  // values (rows) a lane holds after all G lanes met
  const int lane = threadIdx.x & 31, t = lane % G, sub = lane / G;
  // Whole-warp loop: start and end are the same on every lane, so the shuffles' full mask holds.
  constexpr int STEP = ROWS * PER;
  const long long rstride = (long long)PER * xs;  // from row r to row r + 1 of a step
  for (long long base = start; base < end; base += STEP) {
    // rows r of the step with r * PER < left are in the warp's run (left may be <= 0)
    const int left = (int)(end - base < STEP ? end - base : STEP) - sub;
    const T* x0 = x + (base + sub) * xs;
    uint4 p[ROWS];
#pragma unroll
    for (int r = 0; r < ROWS; ++r) {
      p[r] = make_uint4(0u, 0u, 0u, 0u);
      if (r * PER < left) {
        const T* xr = x0 + r * rstride;
        const int mis = ALIGNED ? 0 : (int)(((unsigned long long)xr % 16) / sizeof(T));
        if (t < (cols + mis + VEC - 1) / VEC)
          p[r] = load_once(reinterpret_cast<const uint4*>(xr - mis) + t);
      }
    }
    float v[ROWS];
#pragma unroll
    for (int r = 0; r < ROWS; ++r) {
      const T* xr = x0 + (r * PER < left ? r : 0) * rstride;
      const int mis = ALIGNED ? 0 : (int)(((unsigned long long)xr % 16) / sizeof(T));
      // a vector not loaded is zeros, but masking keeps the columns outside the row out
      v[r] = r * PER < left ? vec_sum<T>(p[r], t, mis, cols) : 0.f;
    }
    // Transposing tree over the G lanes: at each exchange a lane keeps half its rows (the upper
    // half where its bit is set), adds its partner's values for them and gives the other half.
    int first = 0;  // the row (of ROWS) of v[0] on this lane
#pragma unroll
    for (int h = ROWS / 2, off = G / 2; h >= KEEP && off > 0; h /= 2, off /= 2) {
      const bool upper = lane & off;
#pragma unroll
      for (int i = 0; i < h; ++i) {
        const float keep = upper ? v[i + h] : v[i];
        const float give = upper ? v[i] : v[i + h];
        v[i] = keep + __shfl_xor_sync(0xffffffffu, give, off);
      }
      if (upper) first += h;
    }
    // The lanes left with one row each finish it over the remaining (lower) lane bits.
#pragma unroll
    for (int off = G / HALVE / 2; off > 0; off /= 2)
      v[0] += __shfl_xor_sync(0xffffffffu, v[0], off);
    if (t % (G / HALVE) == 0) {
#pragma unroll
      for (int i = 0; i < KEEP; ++i) {
        if ((first + i) * PER < left) y[base + sub + (first + i) * PER] = Cvt<T>::from(v[i]);
      }
    }
  }
}

// ALIGNED decided once for the whole launch (the same on every thread).
template <typename T, int G>
__device__ __forceinline__ void narrow_g(const T* x, T* y, long long start, long long end,
                                         int cols, long long xs) {
  if ((unsigned long long)x % 16 == 0 && xs % Cvt<T>::VEC == 0)
    narrow_rows<T, G, true>(x, y, start, end, cols, xs);
  else
    narrow_rows<T, G, false>(x, y, start, end, cols, xs);
}

// G as a template argument (the exchanges unroll), picked at run time from lg = log2(G): 8, 16
// or 32 (rows of fewer than 8 vectors take 8 lanes, the lanes past the row load nothing).
// Warp w takes rows [w * chunk, (w + 1) * chunk).
template <typename T>
__device__ __forceinline__ void narrow_any(const T* x, T* y, long long rows, int cols,
                                           long long xs, long long chunk, int lg) {
  const long long warp = (long long)blockIdx.x * (blockDim.x >> 5) + (threadIdx.x >> 5);
  const long long start = warp * chunk;
  const long long end = start + chunk < rows ? start + chunk : rows;
  switch (lg) {  // three widths: all six (G = 1 to 32) in one kernel made ptxas spill at 64
    case 3: narrow_g<T, 8>(x, y, start, end, cols, xs); break;
    case 4: narrow_g<T, 16>(x, y, start, end, cols, xs); break;
    default: narrow_g<T, 32>(x, y, start, end, cols, xs); break;
  }
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
extern "C" __global__ void __launch_bounds__(NARROW_BLOCK, NARROW_MIN) reduce_narrow_f16(
    const __half* x, __half* y, long long rows, int cols, long long xs, long long chunk, int lg) {
  narrow_any<__half>(x, y, rows, cols, xs, chunk, lg);
}
extern "C" __global__ void __launch_bounds__(NARROW_BLOCK, NARROW_MIN) reduce_narrow_bf16(
    const __nv_bfloat16* x, __nv_bfloat16* y, long long rows, int cols, long long xs,
    long long chunk, int lg) {
  narrow_any<__nv_bfloat16>(x, y, rows, cols, xs, chunk, lg);
}
extern "C" __global__ void __launch_bounds__(NARROW_BLOCK, NARROW_MIN) reduce_narrow_f32(
    const float* x, float* y, long long rows, int cols, long long xs, long long chunk, int lg) {
  narrow_any<float>(x, y, rows, cols, xs, chunk, lg);
}
"""

_MOD = load(CUDA_SOURCE, CONFIG)
_KERNELS = {
    torch.float16: _MOD.reduce_f16,
    torch.bfloat16: _MOD.reduce_bf16,
    torch.float32: _MOD.reduce_f32,
}
_NARROW = {
    torch.float16: _MOD.reduce_narrow_f16,
    torch.bfloat16: _MOD.reduce_narrow_bf16,
    torch.float32: _MOD.reduce_narrow_f32,
}
_PLANS: dict = {}  # launch plans by call signature; emptied when full
MAX_PLANS = 1024
MAX_COLS = 2**31 - 64  # in-row indices are 32-bit in the kernel
NARROW_VECS = 32  # the narrow path: a row spans at most this many vectors (one a lane)


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
    aligned = x2.data_ptr() % 16 == 0
    key = (x2.shape, x2.stride(0), aligned, x.dtype, x.device)
    plan = _PLANS.get(key)
    if plan is None:
        if len(_PLANS) >= MAX_PLANS:
            _PLANS.clear()
        plan = _PLANS[key] = launch_plan(
            x2.shape[0], cols, x2.stride(0), aligned, x.dtype, CONFIG, x.device
        )
    kernel, grid, block, *extra = plan
    kernel(grid, block, x2, out, x2.shape[0], cols, x2.stride(0), *extra)
    return out


def launch_plan(rows, cols, stride, aligned, dtype, config, device) -> tuple:
    """(kernel, grid, block, *its last arguments): narrow_plan's where narrow_fits, else
    rows_plan's (the plan and kernel every row took before the narrow path). Without PERSIST
    the narrow grid does not depend on how many blocks an SM holds (blocks_per_sm: not read)."""
    size = dtype.itemsize
    if not narrow_fits(cols, stride, aligned, size):
        return (_KERNELS[dtype], *rows_plan(rows, cols, size, config))
    kernel = _NARROW[dtype]
    resident = 0
    if config["PERSIST"]:
        sms = torch.cuda.get_device_properties(device).multi_processor_count
        resident = sms * blocks_per_sm(kernel.num_regs, config["NARROW_BLOCK"])
    nvec = row_vectors(cols, stride, aligned, size)
    return (kernel, *narrow_plan(rows, nvec, resident, config))


def narrow_fits(cols: int, stride: int, aligned: bool, size: int) -> bool:
    """Whether rows take the narrow path: every lane of the group holds a whole 16-byte vector of
    every row. The base and the row stride are whole vectors, the width too, and its vectors are
    as many as the group's lanes (8, 16 or 32, up to NARROW_VECS). A row off whole vectors
    leaves a lane idle or half full; fewer than 8 vectors leave lanes of an 8-lane group idle."""
    vec = 16 // size
    if not aligned or stride % vec or cols % vec:
        return False
    nvec = row_vectors(cols, stride, aligned, size)
    return nvec <= NARROW_VECS and nvec == max(8, _pow2(nvec))


def row_vectors(cols: int, stride: int, aligned: bool, size: int) -> int:
    """The most 16-byte vectors a row spans, from the boundary at or before its start."""
    vec = 16 // size
    if aligned and stride % vec == 0:
        return -(-cols // vec)
    return -(-(cols + vec - 1) // vec)


def narrow_plan(rows: int, nvec: int, resident: int, config: dict) -> tuple[int, int, int, int]:
    """(grid, block, chunk, lg): G = 2**lg >= nvec lanes a row (8, 16 or 32: the kernels
    narrow_any picks from), a warp takes `chunk` rows (whole steps of ROWS * 32 / G rows without
    PERSIST; with it, the rows shared evenly among the warps of `resident` blocks of
    NARROW_BLOCK, in multiples of 32 / G)."""
    g = max(8, _pow2(nvec))
    per = 32 // g
    step = per * config["ROWS"]
    chunk = step
    if config["PERSIST"]:  # as many warps as fit at once, or as there are steps of rows
        warps = min(_cdiv(rows, step), resident * (config["NARROW_BLOCK"] // 32))
        chunk = _cdiv(_cdiv(rows, warps), per) * per
    warps = _cdiv(rows, chunk)
    block = min(config["NARROW_BLOCK"], 32 * warps)
    return _cdiv(warps, block // 32), block, chunk, g.bit_length() - 1


def blocks_per_sm(regs: int, block: int) -> int:
    """Blocks of `block` threads an sm_90 SM holds at `regs` registers a thread: 64 warps, 32
    blocks, 64K registers in four quarters, allocated per warp in units of 256."""
    warp_regs = -(-max(regs, 1) * 32 // 256) * 256
    warps = min(64, 4 * (16384 // warp_regs))
    return max(1, min(32, warps // (block // 32)))


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


def _cdiv(a: int, b: int) -> int:
    return -(-a // b)
