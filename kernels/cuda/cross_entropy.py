"""Mean token cross-entropy in CUDA C++: logits (N, V) in any of fp16/bf16/fp32, int64 targets,
-100 ignored; fp32 loss, as models compute it after upcasting the logits.

One kernel, one launch a call. Each row goes to a group of G threads (a slice of a warp for
short vocabularies, a whole block of MAX_THREADS for LLM ones) that reads its target first: an
ignored row reads no logits at all, and the target logit is one more load in flight beside the
row's. The group walks the row once in 16-byte vectors from the 16-byte boundary at or before
the row, ITEMS loads in flight per thread, keeping a running maximum and a running sum of
exp(x - maximum) (online log-sum-exp, rescaled once per step; a logit in the thousands never
overflows), merged across the group in a fixed order; the row's loss is (max - x[target]) +
log(sum). Small blocks (128 threads a row) keep eight rows in flight per SM: a row's start (the
target's latency) and end (the merge) overlap other rows' loads, where two 512-thread blocks
an SM left the memory idle between rows (78 % of the copy ceiling at 8192x50257 on the H100).

The mean, bitwise deterministic without a second launch: each block writes its partial (loss
sum, rows counted) to its own slot and draws a ticket; the last block of each GROUP of blocks
sums their slots in slot order, and the last of those sums the group sums in group order, so
the order never depends on which block finished when. The block that draws a ticket's last
number sets it back to 0 for the next call. The slots live in a workspace per device, which calls
on one stream use one after the other.
"""

import torch

from autokernel.cuda_build import load

KERNEL_TYPE = "cross_entropy"
BACKEND = "cuda"
# Tunables; the builder passes each as a -D define, and kernel_fn reads them for the launch.
# ITEMS: 16-byte loads a thread has in flight per step; MAX_THREADS: most threads on one row;
# NARROW_BLOCK: block size when a row needs a warp or less. ITEMS 4 beat 6 at all four sizes
# timed on an H100 (8192x50257: 277.9 vs 281.2 us; h100-cuda-2026-12-07-ce2-*.md).
CONFIG = {"ITEMS": 4, "MAX_THREADS": 128, "NARROW_BLOCK": 256}
SEARCH_SPACE = {
    "ITEMS": [2, 4, 6],
    "MAX_THREADS": [64, 128, 256, 512, 1024],
    "NARROW_BLOCK": [64, 128, 256, 512],
}

CUDA_SOURCE = r"""
#include <cuda_fp16.h>
#include <cuda_bf16.h>

#define IGNORE_INDEX (-100)
#define GROUP 32  // blocks whose partials one of them sums, one a lane

// The larger of the two block sizes kernel_fn launches, and room for 1024 / BOUND blocks: a cap
// of 64 registers a thread (the 64K-register file over 1024 threads), so at least 1024 threads
// of loads are in flight on an SM.
#define BOUND (MAX_THREADS > NARROW_BLOCK ? MAX_THREADS : NARROW_BLOCK)
#define MIN_BLOCKS (1024 / BOUND)

// One 16-byte vector of T as VEC floats. The 16 bytes travel as a uint4, so every load is a
// single 128-bit instruction (LDG.E.128). at(w, q): element q of the words w[0..3].
template <typename T> struct Cvt;
template <> struct Cvt<float> {
  static constexpr int VEC = 4;
  static __device__ __forceinline__ float at(const unsigned* w, int q) {
    return __uint_as_float(w[q]);
  }
  static __device__ __forceinline__ float one(float v) { return v; }
};
template <> struct Cvt<__nv_bfloat16> {
  static constexpr int VEC = 8;
  static __device__ __forceinline__ float at(const unsigned* w, int q) {
    return __uint_as_float(q % 2 ? w[q / 2] & 0xffff0000u : w[q / 2] << 16);
  }
  static __device__ __forceinline__ float one(__nv_bfloat16 v) { return __bfloat162float(v); }
};
template <> struct Cvt<__half> {
  static constexpr int VEC = 8;
  static __device__ __forceinline__ float at(const unsigned* w, int q) {
    const unsigned bits = q % 2 ? w[q / 2] >> 16 : w[q / 2] & 0xffffu;
    return __half2float(__ushort_as_half((unsigned short)bits));
  }
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
template <typename V>
__device__ __forceinline__ V group_sum(V v, int g) {
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
template <typename V>
__device__ __forceinline__ V block_sum(V v) {
  __shared__ V red[32];
  v = group_sum(v, 32);
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  __syncthreads();  // red may still be read by an earlier reduction
  if (lane == 0) red[warp] = v;
  __syncthreads();
  v = lane < (int)(blockDim.x >> 5) ? red[lane] : V(0);
  return group_sum(v, 32);
}

__device__ __forceinline__ MaxSum block_merge(MaxSum v) {
  __shared__ float red_m[32], red_s[32];
  v = group_merge(v, 32);
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
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
// ex2.approx (with a multiply); expf adds a range reduction of several FMAs. The ex2 unit
// bounds the arithmetic: 16 results a clock an SM, so a row's exps take a third of the time
// its bytes do on an H100, and x - m stays exact at the maximum (exp(0) = 1 exactly).
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
    for (int j = 0; j < VEC; ++j)
      s += (e0 + j >= 0 && e0 + j < cols) ? __expf(f[j] - m) : 0.f;
  }
  return s;
}

// The call's mean from the blocks' partials (s, n: valid on thread 0). Workspace ws, for at
// most cap blocks: tickets[0] counts finished groups, tickets[1 + grp] finished blocks of grp;
// then the group sums and counts, then the block sums and counts.
__device__ __forceinline__ void finish(float s, int n, int* ws, float* out, int cap) {
  __shared__ int last_block, last_group;
  const int capg = (cap + GROUP - 1) / GROUP;
  int* tickets = ws;
  float* gs = reinterpret_cast<float*>(ws + 1 + capg);
  int* gn = ws + 1 + 2 * capg;
  float* bs = reinterpret_cast<float*>(ws + 1 + 3 * capg);
  int* bn = ws + 1 + 3 * capg + cap;
  const int b = blockIdx.x, grp = b / GROUP;
  const int ngrp = (gridDim.x + GROUP - 1) / GROUP;
  const int size = min(GROUP, (int)gridDim.x - grp * GROUP);
  if (threadIdx.x == 0) {
    bs[b] = s;
    bn[b] = n;
    __threadfence();  // the partial is visible to whoever sees this block's ticket
    last_block = atomicAdd(tickets + 1 + grp, 1) == size - 1;
  }
  __syncthreads();
  if (!last_block) return;
  if (threadIdx.x < 32) {  // the group's slots, one a lane (__ldcg: from L2, never a stale L1)
    __threadfence();
    const int i = threadIdx.x;
    const float v = group_sum(i < size ? __ldcg(bs + grp * GROUP + i) : 0.f, 32);
    const int k = group_sum(i < size ? __ldcg(bn + grp * GROUP + i) : 0, 32);
    if (i == 0) {
      gs[grp] = v;
      gn[grp] = k;
      tickets[1 + grp] = 0;  // every block of the group has drawn: ready for the next call
      __threadfence();
      last_group = atomicAdd(tickets, 1) == ngrp - 1;
    }
  }
  __syncthreads();
  if (!last_group) return;
  __threadfence();
  float v = 0.f;
  int k = 0;
#pragma unroll 4  // four loads in flight: 512 groups (16384 rows) are one round trip
  for (int i = threadIdx.x; i < ngrp; i += blockDim.x) {
    v += __ldcg(gs + i);
    k += __ldcg(gn + i);
  }
  v = block_sum(v);
  k = block_sum(k);
  if (threadIdx.x == 0) {
    out[0] = v / (float)k;  // no row counted: 0 / 0 = NaN, as torch returns
    tickets[0] = 0;
  }
}

template <typename T>
__device__ __forceinline__ void ce(const T* __restrict__ x, const long long* __restrict__ tgt,
                                   int* ws, float* out, long long rows, int cols, long long xs,
                                   int g, int cap) {
  constexpr int VEC = Cvt<T>::VEC;
  const long long row = (long long)blockIdx.x * (blockDim.x / g) + threadIdx.x / g;
  const int t = threadIdx.x % g;
  const long long c = row < rows ? __ldg(tgt + row) : IGNORE_INDEX;
  const bool active = c != IGNORE_INDEX;
  const bool in_range = c >= 0 && c < cols;  // outside: NaN, never a wrong loss
  const T* xr = x + (active ? row : 0) * xs;
  float xc = 0.f;
  if (t == 0 && active && in_range) xc = Cvt<T>::one(xr[c]);
  // Any row start: the walk begins at the 16-byte boundary at or before it.
  const int mis = (int)(((unsigned long long)xr % 16) / sizeof(T));
  const uint4* xv = reinterpret_cast<const uint4*>(xr - mis);
  const int nvec = active ? (cols + mis + VEC - 1) / VEC : 0;
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
  float l = 0.f;
  int n = 0;
  if (g == (int)blockDim.x) {  // one row a block: its loss is the block's partial
    const MaxSum total = g <= 32 ? group_merge(acc, g) : block_merge(acc);
    if (active) l = in_range ? (total.m - xc) + logf(total.s) : NAN;
    n = active;
  } else {  // several rows a block: their losses summed over the block in a fixed order
    const MaxSum total = group_merge(acc, g);
    if (t == 0 && active) l = in_range ? (total.m - xc) + logf(total.s) : NAN;
    l = block_sum(l);
    n = block_sum((int)(t == 0 && active));
  }
  finish(l, n, ws, out, cap);
}

// Entry points (parameter lists written out: the launcher reads them unpreprocessed).
extern "C" __global__ void __launch_bounds__(BOUND, MIN_BLOCKS) ce_f16(
    const __half* x, const long long* tgt, int* ws, float* out, long long rows, int cols,
    long long xs, int g, int cap) {
  ce<__half>(x, tgt, ws, out, rows, cols, xs, g, cap);
}
extern "C" __global__ void __launch_bounds__(BOUND, MIN_BLOCKS) ce_bf16(
    const __nv_bfloat16* x, const long long* tgt, int* ws, float* out, long long rows, int cols,
    long long xs, int g, int cap) {
  ce<__nv_bfloat16>(x, tgt, ws, out, rows, cols, xs, g, cap);
}
extern "C" __global__ void __launch_bounds__(BOUND, MIN_BLOCKS) ce_f32(
    const float* x, const long long* tgt, int* ws, float* out, long long rows, int cols,
    long long xs, int g, int cap) {
  ce<float>(x, tgt, ws, out, rows, cols, xs, g, cap);
}
"""

_MOD = load(CUDA_SOURCE, CONFIG)
_KERNELS = {
    torch.float16: _MOD.ce_f16,
    torch.bfloat16: _MOD.ce_bf16,
    torch.float32: _MOD.ce_f32,
}
_PLANS: dict = {}  # launch plans by call signature; emptied when full
_WORK: dict = {}  # device index -> (blocks it holds, int32 workspace)
# Outgrown workspaces, kept: a CUDA graph captured earlier still writes to the one it saw.
_RETIRED: list = []
MAX_PLANS = 1024
MAX_COLS = 2**31 - 64  # in-row indices are 32-bit in the kernel
GROUP = 32  # as the source's GROUP


def kernel_fn(logits: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
    rows, cols = logits.shape
    if cols > MAX_COLS:
        raise ValueError(f"vocabularies of {cols}: at most {MAX_COLS}")
    x = logits if logits.stride(-1) == 1 else logits.contiguous()
    t = targets if targets.is_contiguous() else targets.contiguous()
    out = torch.empty((), dtype=torch.float32, device=x.device)
    key = (x.shape, x.stride(0), x.dtype)
    plan = _PLANS.get(key)
    if plan is None:
        if len(_PLANS) >= MAX_PLANS:
            _PLANS.clear()
        grid, block, g = rows_plan(rows, cols, x.element_size(), CONFIG)
        plan = _PLANS[key] = (max(grid, 1), block, g)  # no rows: one block writes the NaN
    grid, block, g = plan
    cap, ws = _workspace(x, grid)
    _KERNELS[x.dtype](grid, block, x, t, ws, out, rows, cols, x.stride(0), g, cap)
    return out


def _workspace(x: torch.Tensor, blocks: int) -> tuple[int, torch.Tensor]:
    """The tickets and partial slots for `blocks` blocks on x's device, its tickets zeroed once
    (every call leaves them at 0). One per device: calls on one stream follow one another, and
    the harness and models call the loss on one stream (two calls at once on two streams would
    share it)."""
    device = x.get_device()
    cap, ws = _WORK.get(device, (0, None))
    if cap < blocks:
        if ws is not None:
            _RETIRED.append(ws)
        cap = max(blocks, 2 * cap, 1024)
        capg = -(-cap // GROUP)
        ws = torch.zeros(1 + 3 * capg + 2 * cap, dtype=torch.int32, device=x.device)
        _WORK[device] = (cap, ws)
    return cap, ws


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
