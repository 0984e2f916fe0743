"""Rotary position embedding in CUDA C++ (LLaMA's rotate_half convention) on
(batch, heads, seq, head_dim): out = x * cos + rotate_half(x) * sin, in fp32, one cast when
storing; cos and sin are (seq, head_dim) tables or anything that broadcasts to x.

A group of G threads owns one row (batch, head, position). A thread takes VEC columns of the
first half and the same columns of the second half: 16-byte loads of both halves of x, cos and
sin, two 16-byte stores, nothing shared, no synchronization. x is read through its strides
(q and k arrive as transposed views of the projection), cos and sin through broadcast strides
(0 over batch and heads), so the tables come from L1/L2 after their first row. Shapes whose
half width or strides are not multiples of a vector take the scalar instantiation (VEC = 1).
"""

import torch

from autokernel.cuda_build import load

KERNEL_TYPE = "rotary_embedding"
BACKEND = "cuda"
# Tunables; the builder passes each as a -D define, and kernel_fn reads them for the launch.
# ITEMS: vector pairs per thread along a row (fewer threads per row as it grows); BLOCK: threads
# per block, rows packed in.
CONFIG = {"ITEMS": 1, "BLOCK": 256}
SEARCH_SPACE = {"ITEMS": [1, 2, 4, 8], "BLOCK": [64, 128, 256, 512, 1024]}

CUDA_SOURCE = r"""
#include <cuda_fp16.h>
#include <cuda_bf16.h>


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

// out[i] = x[i] cos[i] - x[i + d/2] sin[i] and out[i + d/2] = x[i + d/2] cos[i + d/2] +
// x[i] sin[i + d/2] for i < d/2 (rotate_half): a thread takes VEC columns of both halves.
// Rows are (batch, head, position); cos and sin are read through strides that may be 0 (a table
// broadcast over batch and heads, which L1 and L2 then serve).
template <typename T, int VEC>
__device__ __forceinline__ void rotary_rows(
    const T* __restrict__ x, const T* __restrict__ cs, const T* __restrict__ sn,
    T* __restrict__ y, long long nrows, long long heads, long long seq, int d, long long xb,
    long long xh, long long xs, long long cb, long long ch, long long cq, long long sb,
    long long sh, long long sq, int g) {
  const long long row = (long long)blockIdx.x * (blockDim.x / g) + threadIdx.x / g;
  if (row >= nrows) return;  // no thread waits for another: returning early is safe
  const int t = threadIdx.x % g;
  const long long s = row % seq, bh = row / seq, h = bh % heads, b = bh / heads;
  const T* xr = x + b * xb + h * xh + s * xs;
  const T* cr = cs + b * cb + h * ch + s * cq;
  const T* sr = sn + b * sb + h * sh + s * sq;
  T* yr = y + row * d;
  const int half = d / 2;
  for (int c = t * VEC; c < half; c += g * VEC) {
    const Pack<T, VEC> lo = *reinterpret_cast<const Pack<T, VEC>*>(xr + c);
    const Pack<T, VEC> hi = *reinterpret_cast<const Pack<T, VEC>*>(xr + c + half);
    const Pack<T, VEC> cl = *reinterpret_cast<const Pack<T, VEC>*>(cr + c);
    const Pack<T, VEC> chh = *reinterpret_cast<const Pack<T, VEC>*>(cr + c + half);
    const Pack<T, VEC> sl = *reinterpret_cast<const Pack<T, VEC>*>(sr + c);
    const Pack<T, VEC> shh = *reinterpret_cast<const Pack<T, VEC>*>(sr + c + half);
    Pack<T, VEC> ol, oh;
#pragma unroll
    for (int j = 0; j < VEC; ++j) {
      const float a = to_f(lo.v[j]), e = to_f(hi.v[j]);
      ol.v[j] = from_f<T>(a * to_f(cl.v[j]) - e * to_f(sl.v[j]));
      oh.v[j] = from_f<T>(e * to_f(chh.v[j]) + a * to_f(shh.v[j]));
    }
    *reinterpret_cast<Pack<T, VEC>*>(yr + c) = ol;
    *reinterpret_cast<Pack<T, VEC>*>(yr + c + half) = oh;
  }
}

extern "C" __global__ void __launch_bounds__(BLOCK) rotary_f16(
    const __half* x, const __half* cs, const __half* sn, __half* y, long long nrows,
    long long heads, long long seq, int d, long long xb, long long xh, long long xs, long long cb,
    long long ch, long long cq, long long sb, long long sh, long long sq, int g) {
  rotary_rows<__half, 8>(x, cs, sn, y, nrows, heads, seq, d, xb, xh, xs, cb, ch, cq, sb, sh, sq,
      g);
}
extern "C" __global__ void __launch_bounds__(BLOCK) rotary_bf16(
    const __nv_bfloat16* x, const __nv_bfloat16* cs, const __nv_bfloat16* sn, __nv_bfloat16* y,
    long long nrows, long long heads, long long seq, int d, long long xb, long long xh,
    long long xs, long long cb, long long ch, long long cq, long long sb, long long sh,
    long long sq, int g) {
  rotary_rows<__nv_bfloat16, 8>(x, cs, sn, y, nrows, heads, seq, d, xb, xh, xs, cb, ch, cq, sb, sh,
      sq, g);
}
extern "C" __global__ void __launch_bounds__(BLOCK) rotary_f32(
    const float* x, const float* cs, const float* sn, float* y, long long nrows, long long heads,
    long long seq, int d, long long xb, long long xh, long long xs, long long cb, long long ch,
    long long cq, long long sb, long long sh, long long sq, int g) {
  rotary_rows<float, 4>(x, cs, sn, y, nrows, heads, seq, d, xb, xh, xs, cb, ch, cq, sb, sh, sq, g);
}
extern "C" __global__ void __launch_bounds__(BLOCK) rotary_f16_scalar(
    const __half* x, const __half* cs, const __half* sn, __half* y, long long nrows,
    long long heads, long long seq, int d, long long xb, long long xh, long long xs, long long cb,
    long long ch, long long cq, long long sb, long long sh, long long sq, int g) {
  rotary_rows<__half, 1>(x, cs, sn, y, nrows, heads, seq, d, xb, xh, xs, cb, ch, cq, sb, sh, sq,
      g);
}
extern "C" __global__ void __launch_bounds__(BLOCK) rotary_bf16_scalar(
    const __nv_bfloat16* x, const __nv_bfloat16* cs, const __nv_bfloat16* sn, __nv_bfloat16* y,
    long long nrows, long long heads, long long seq, int d, long long xb, long long xh,
    long long xs, long long cb, long long ch, long long cq, long long sb, long long sh,
    long long sq, int g) {
  rotary_rows<__nv_bfloat16, 1>(x, cs, sn, y, nrows, heads, seq, d, xb, xh, xs, cb, ch, cq, sb, sh,
      sq, g);
}
extern "C" __global__ void __launch_bounds__(BLOCK) rotary_f32_scalar(
    const float* x, const float* cs, const float* sn, float* y, long long nrows, long long heads,
    long long seq, int d, long long xb, long long xh, long long xs, long long cb, long long ch,
    long long cq, long long sb, long long sh, long long sq, int g) {
  rotary_rows<float, 1>(x, cs, sn, y, nrows, heads, seq, d, xb, xh, xs, cb, ch, cq, sb, sh, sq, g);
}
"""

_MOD = load(CUDA_SOURCE, CONFIG)
# (dtype, vector loads) -> kernel
_KERNELS = {
    (torch.float16, True): _MOD.rotary_f16,
    (torch.bfloat16, True): _MOD.rotary_bf16,
    (torch.float32, True): _MOD.rotary_f32,
    (torch.float16, False): _MOD.rotary_f16_scalar,
    (torch.bfloat16, False): _MOD.rotary_bf16_scalar,
    (torch.float32, False): _MOD.rotary_f32_scalar,
}
_PLANS: dict = {}  # launch plans by call signature; emptied when full
MAX_PLANS = 1024


def kernel_fn(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    out = torch.empty(x.shape, dtype=x.dtype, device=x.device)
    if x.numel() == 0:
        return out
    # Tables in x's dtype, as models pass them; others are cast once here (a timed copy).
    cos = cos if cos.dtype == x.dtype else cos.to(x.dtype)
    sin = sin if sin.dtype == x.dtype else sin.to(x.dtype)
    x4 = x if x.dim() == 4 else x.reshape(1, -1, *x.shape[-2:])
    if x4.stride(-1) != 1:
        x4 = x4.contiguous()
    c4, s4 = cos.expand(x.shape), sin.expand(x.shape)  # views: broadcast dims get stride 0
    if x.dim() != 4:
        c4, s4 = c4.reshape(x4.shape), s4.reshape(x4.shape)
    c4 = c4 if c4.stride(-1) == 1 else c4.contiguous()
    s4 = s4 if s4.stride(-1) == 1 else s4.contiguous()
    key = (x4.shape, x4.stride(), c4.stride(), s4.stride(), x.dtype, cos.dtype,
           x4.data_ptr() % 16, c4.data_ptr() % 16, s4.data_ptr() % 16)  # fmt: skip
    plan = _PLANS.get(key)
    if plan is None:
        if len(_PLANS) >= MAX_PLANS:
            _PLANS.clear()
        plan = _PLANS[key] = _plan(x4, c4, s4)
    kernel, grid, block, g = plan
    b, h, s, d = x4.shape
    kernel(grid, block, x4, c4, s4, out, b * h * s, h, s, d, *x4.stride()[:3], *c4.stride()[:3],
           *s4.stride()[:3], g)  # fmt: skip
    return out


def _plan(x4: torch.Tensor, c4: torch.Tensor, s4: torch.Tensor) -> tuple:
    """(kernel, grid, block, threads per row) for this signature."""
    vec = 16 // x4.element_size()
    half = x4.shape[-1] // 2
    fits = half % vec == 0 and all(
        t.data_ptr() % 16 == 0 and all(st % vec == 0 for st in t.stride()[:3]) for t in (x4, c4, s4)
    )
    vec = vec if fits else 1
    g = min(_pow2(-(-(half // vec) // CONFIG["ITEMS"])), 32, CONFIG["BLOCK"])
    rows = x4.shape[0] * x4.shape[1] * x4.shape[2]
    block = CONFIG["BLOCK"]
    return _KERNELS[(x4.dtype, fits)], -(-rows // (block // g)), block, g


def _pow2(n: int) -> int:
    return 1 << (n - 1).bit_length() if n > 1 else 1
