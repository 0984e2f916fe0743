"""SwiGLU MLP out = (silu(x @ w_gate.T) * (x @ w_up.T)) @ w_down.T, weights in nn.Linear layout.

VARIANT "two_kernels": kernel 1 computes one BLOCK_M x BLOCK_I tile of h = silu(g) * u with two
fp32 accumulators fed by the same x tile (x is read once for both projections, and g and u never
reach memory); kernel 2 is a tiled matmul h @ w_down.T. Both walk their reduction dimension in
BLOCK_K steps on tensor cores and number their tiles in GROUP_M-row groups for L2 reuse. The
weights are read through their strides as transposed tiles, so nothing is copied.

silu is computed in fp32 as g * sigmoid(g) with sigmoid built from exp(-|g|), which never
overflows. H_DTYPE picks how h crosses between the kernels: "fp32" keeps it exact, and for
fp16/bf16 inputs kernel 2 splits it into a high and a low half-precision part (two tensor-core
dots, h kept to ~16 bits); "input" stores it in x's dtype (half the traffic, one dot, as the
eager model rounds it), which the large_activations case rejects. fp32 inputs: TF32 is too
coarse for the 1e-4 tolerance; FP32_PRECISION "tf32x3" (three TF32 dots) or "fp64" (exact
products, fp64 accumulation on DMMA), with tiles capped at 64x64x32.
"""

import torch
import triton
import triton.language as tl

from autokernel.launch import launcher, remember

KERNEL_TYPE = "fused_mlp"
BACKEND = "triton"
# Tunables read by kernel_fn; the built-in tuner rewrites this dict literal, so keep it a literal.
CONFIG = {
    "VARIANT": "two_kernels",
    "H_DTYPE": "fp32",  # "fp32" | "input": dtype of the intermediate h between the kernels
    "FP32_PRECISION": "tf32x3",  # fp32 inputs only: "tf32x3" | "fp64"
    # kernel 1: h tile = BLOCK_M x BLOCK_I, reduction over hidden in BLOCK_K steps
    "BLOCK_M": 128,
    "BLOCK_I": 128,
    "BLOCK_K": 64,
    "GROUP_M": 8,
    "num_warps": 8,
    "num_stages": 3,
    # kernel 2: out tile = BLOCK_M x DOWN_BLOCK_N, reduction over intermediate
    "DOWN_BLOCK_N": 256,
    "DOWN_BLOCK_K": 64,
    "DOWN_num_warps": 8,
    "DOWN_num_stages": 3,
}
# Allowed values per CONFIG key: every combination must be correct (slow is fine, wrong is not).
# Left out, as they fail large_activations (h of +-hundreds whose down-projection cancels):
# H_DTYPE "input" (h rounded to x's dtype: at the GPU size 3x the fp16 and 11x the bf16
# tolerance, simulated; bf16 fails the CPU size too), and FP32_PRECISION "ieee" (its FMA chain
# sums sequentially: ~1.4x the fp32 tolerance at the GPU size, simulated).
SEARCH_SPACE = {
    "VARIANT": ["two_kernels"],
    "H_DTYPE": ["fp32"],
    "FP32_PRECISION": ["tf32x3", "fp64"],
    "BLOCK_M": [32, 64, 128, 256],
    "BLOCK_I": [32, 64, 128, 256],
    "BLOCK_K": [32, 64, 128],
    "GROUP_M": [1, 4, 8, 16],
    "num_warps": [4, 8],
    "num_stages": [2, 3, 4, 5],
    "DOWN_BLOCK_N": [32, 64, 128, 256],
    "DOWN_BLOCK_K": [32, 64, 128],
    "DOWN_num_warps": [4, 8],
    "DOWN_num_stages": [2, 3, 4, 5],
}

# Launch plans by call signature (shape, strides, dtype, device, 16-byte alignment, CONFIG): all
# that kernel_fn derives from them, and Triton's compiled kernel. A repeat call costs a lookup,
# one allocation and the launch (deriving it all per call cost 35 us of host time on the H200).
_PLANS: dict = {}

SMEM_BYTES = 200 * 1024  # pipeline-buffer budget per program; the H200 allows 227 KB
FP32_MAX_BLOCK_MN = 64  # fp32 inputs: fp32 tiles (and fp64 accumulators) cost twice the space
FP32_MAX_BLOCK_K = 32
# Kernel 1 holds two accumulators and stages its fp32 h tile through shared memory on the way
# out: a 256x256 tile needs 256 KB there (sm_90 compile), past the 227 KB limit.
GATE_UP_MAX_TILE = 128 * 256


@triton.jit
def _dot(a, b, acc, DOT_MODE: tl.constexpr):
    """acc + a @ b in the precision DOT_MODE names (acc is fp64 for "fp64", else fp32)."""
    if DOT_MODE == "fp64":
        out = tl.dot(a.to(tl.float64), b.to(tl.float64), acc, out_dtype=tl.float64)
    elif DOT_MODE == "upcast":
        # The interpreter multiplies bf16 as raw integers: widen first (exact).
        out = tl.dot(a.to(tl.float32), b.to(tl.float32), acc, input_precision="ieee")
    elif DOT_MODE == "native":
        out = tl.dot(a, b, acc)  # fp16/bf16 operands on tensor cores, fp32 accumulator
    else:
        out = tl.dot(a, b, acc, input_precision=DOT_MODE)  # fp32: "tf32x3"
    return out


@triton.jit
def _tile_ids(
    pid, n_rows, n_cols, BLOCK_R: tl.constexpr, BLOCK_C: tl.constexpr, GROUP: tl.constexpr
):
    """Grouped (L2-swizzled) order: GROUP tile-rows are walked down before moving right."""
    num_pid_r = tl.cdiv(n_rows, BLOCK_R)
    num_pid_c = tl.cdiv(n_cols, BLOCK_C)
    num_pid_in_group = GROUP * num_pid_c
    first_pid_r = (pid // num_pid_in_group) * GROUP
    group_size = min(num_pid_r - first_pid_r, GROUP)
    pid_r = first_pid_r + (pid % num_pid_in_group) % group_size
    pid_c = (pid % num_pid_in_group) // group_size
    return pid_r, pid_c


@triton.jit
def _gate_up_kernel(
    X_ptr,
    Wg_ptr,
    Wu_ptr,
    H_ptr,
    M,
    n_inter,
    n_hidden,
    X_row_stride,
    X_col_stride,
    Wg_row_stride,
    Wg_col_stride,
    Wu_row_stride,
    Wu_col_stride,
    H_row_stride,
    H_col_stride,
    BLOCK_M: tl.constexpr,
    BLOCK_I: tl.constexpr,
    BLOCK_K: tl.constexpr,
    GROUP_M: tl.constexpr,
    DOT_MODE: tl.constexpr,
):
    pid_m, pid_i = _tile_ids(tl.program_id(0), M, n_inter, BLOCK_M, BLOCK_I, GROUP_M)
    # Rows/columns past the end wrap onto valid ones (loads need no mask; the store masks them).
    offs_m = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_i = pid_i * BLOCK_I + tl.arange(0, BLOCK_I)
    offs_xm = (offs_m % M).to(tl.int64)
    offs_wi = (offs_i % n_inter).to(tl.int64)
    offs_k = tl.arange(0, BLOCK_K)
    x_ptrs = X_ptr + offs_xm[:, None] * X_row_stride + offs_k[None, :] * X_col_stride
    # w_gate is (inter, hidden): the [BLOCK_K, BLOCK_I] tile of w_gate.T, read through strides.
    wg_ptrs = Wg_ptr + offs_k[:, None] * Wg_col_stride + offs_wi[None, :] * Wg_row_stride
    wu_ptrs = Wu_ptr + offs_k[:, None] * Wu_col_stride + offs_wi[None, :] * Wu_row_stride

    if DOT_MODE == "fp64":
        acc_g = tl.zeros((BLOCK_M, BLOCK_I), dtype=tl.float64)
        acc_u = tl.zeros((BLOCK_M, BLOCK_I), dtype=tl.float64)
    else:
        acc_g = tl.zeros((BLOCK_M, BLOCK_I), dtype=tl.float32)
        acc_u = tl.zeros((BLOCK_M, BLOCK_I), dtype=tl.float32)
    for k in range(0, tl.cdiv(n_hidden, BLOCK_K)):
        k_left = n_hidden - k * BLOCK_K
        x = tl.load(x_ptrs, mask=offs_k[None, :] < k_left, other=0.0)
        wg = tl.load(wg_ptrs, mask=offs_k[:, None] < k_left, other=0.0)
        wu = tl.load(wu_ptrs, mask=offs_k[:, None] < k_left, other=0.0)
        acc_g = _dot(x, wg, acc_g, DOT_MODE)
        acc_u = _dot(x, wu, acc_u, DOT_MODE)
        x_ptrs += BLOCK_K * X_col_stride
        wg_ptrs += BLOCK_K * Wg_col_stride
        wu_ptrs += BLOCK_K * Wu_col_stride

    g = acc_g.to(tl.float32)
    u = acc_u.to(tl.float32)
    # sigmoid from e = exp(-|g|) in (0, 1]: no overflow for any g, no inf * 0.
    e = tl.exp(-tl.abs(g))
    sig = tl.where(g >= 0, 1.0 / (1.0 + e), e / (1.0 + e))
    h = g * sig * u

    offs_hm = offs_m.to(tl.int64)
    offs_hi = offs_i.to(tl.int64)
    h_ptrs = H_ptr + offs_hm[:, None] * H_row_stride + offs_hi[None, :] * H_col_stride
    h_mask = (offs_hm[:, None] < M) & (offs_hi[None, :] < n_inter)
    tl.store(h_ptrs, h.to(H_ptr.dtype.element_ty), mask=h_mask)


@triton.jit
def _down_kernel(
    H_ptr,
    Wd_ptr,
    Out_ptr,
    M,
    n_hidden,
    n_inter,
    H_row_stride,
    H_col_stride,
    Wd_row_stride,
    Wd_col_stride,
    Out_row_stride,
    Out_col_stride,
    BLOCK_M: tl.constexpr,
    BLOCK_N: tl.constexpr,
    BLOCK_K: tl.constexpr,
    GROUP_M: tl.constexpr,
    DOT_MODE: tl.constexpr,
    SPLIT_H: tl.constexpr,  # fp32 h with half weights: h = hi + lo, two half-precision dots
):
    pid_m, pid_n = _tile_ids(tl.program_id(0), M, n_hidden, BLOCK_M, BLOCK_N, GROUP_M)
    offs_m = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_n = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    offs_hm = (offs_m % M).to(tl.int64)
    offs_wn = (offs_n % n_hidden).to(tl.int64)
    offs_k = tl.arange(0, BLOCK_K)
    h_ptrs = H_ptr + offs_hm[:, None] * H_row_stride + offs_k[None, :] * H_col_stride
    # w_down is (hidden, inter): the [BLOCK_K, BLOCK_N] tile of w_down.T, read through strides.
    w_ptrs = Wd_ptr + offs_k[:, None] * Wd_col_stride + offs_wn[None, :] * Wd_row_stride

    if DOT_MODE == "fp64":
        acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float64)
    else:
        acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for k in range(0, tl.cdiv(n_inter, BLOCK_K)):
        k_left = n_inter - k * BLOCK_K
        h = tl.load(h_ptrs, mask=offs_k[None, :] < k_left, other=0.0)
        w = tl.load(w_ptrs, mask=offs_k[:, None] < k_left, other=0.0)
        if SPLIT_H:
            h_hi = h.to(Wd_ptr.dtype.element_ty)
            h_lo = (h - h_hi.to(tl.float32)).to(Wd_ptr.dtype.element_ty)
            acc = _dot(h_hi, w, acc, DOT_MODE)
            acc = _dot(h_lo, w, acc, DOT_MODE)
        else:
            acc = _dot(h, w, acc, DOT_MODE)
        h_ptrs += BLOCK_K * H_col_stride
        w_ptrs += BLOCK_K * Wd_col_stride

    offs_om = offs_m.to(tl.int64)
    offs_on = offs_n.to(tl.int64)
    o_ptrs = Out_ptr + offs_om[:, None] * Out_row_stride + offs_on[None, :] * Out_col_stride
    o_mask = (offs_om[:, None] < M) & (offs_on[None, :] < n_hidden)
    tl.store(o_ptrs, acc.to(Out_ptr.dtype.element_ty), mask=o_mask)


def _block(cap: int, dim: int) -> int:
    """The CONFIG block, shrunk to the dimension's power of two; tl.dot needs at least 16."""
    return min(cap, max(16, triton.next_power_of_2(dim)))


def _fill_sms(rows: int, cols: int, block_r: int, block_c: int, num_sms: int) -> tuple:
    """Narrow the tiles of a skinny problem (decode-time M) until there is about one per SM."""
    while triton.cdiv(rows, block_r) * triton.cdiv(cols, block_c) < num_sms and block_c > 32:
        block_c //= 2
    while triton.cdiv(rows, block_r) * triton.cdiv(cols, block_c) < num_sms and block_r > 32:
        block_r //= 2
    return block_r, block_c


def _stages(wanted: int, stage_bytes: int) -> int:
    """num_stages, lowered until the pipeline buffers fit in shared memory."""
    return max(1, min(wanted, SMEM_BYTES // stage_bytes))


def kernel_fn(
    x: torch.Tensor, w_gate: torch.Tensor, w_up: torch.Tensor, w_down: torch.Tensor
) -> torch.Tensor:
    key = (
        x.shape,
        x.stride(),
        x.dtype,
        x.device,
        x.data_ptr() % 16,
        *[(w.shape, w.stride(), w.dtype, w.data_ptr() % 16) for w in (w_gate, w_up, w_down)],
        *CONFIG.values(),
    )
    run = _PLANS.get(key)
    if run is None:
        run = remember(_PLANS, key, _plan(x, w_gate, w_up, w_down))
    return run(x, w_gate, w_up, w_down)


def _plan(x: torch.Tensor, w_gate: torch.Tensor, w_up: torch.Tensor, w_down: torch.Tensor):
    """run(x, w_gate, w_up, w_down) for every call with their signature (see _PLANS)."""
    n_hidden = x.shape[-1]
    n_inter = w_gate.shape[0]
    if w_gate.shape != (n_inter, n_hidden) or w_up.shape != (n_inter, n_hidden):
        raise ValueError(f"w_gate/w_up must be ({n_inter}, {n_hidden}) like nn.Linear weights")
    if w_down.shape != (n_hidden, n_inter):
        raise ValueError(f"w_down must be ({n_hidden}, {n_inter}), got {tuple(w_down.shape)}")
    if CONFIG["VARIANT"] != "two_kernels":
        raise ValueError(f"unknown VARIANT {CONFIG['VARIANT']!r}")
    x2 = x.reshape(-1, n_hidden)
    # Rows reachable through x's own pointer: pass x as it is; else every call reshapes (copies).
    as_is = x2.data_ptr() == x.data_ptr()
    M = x2.shape[0]
    out_shape, dtype, device = (*x.shape[:-1], n_hidden), x.dtype, x.device
    if M == 0 or n_hidden == 0:
        return lambda x, w_gate, w_up, w_down: torch.empty(out_shape, dtype=dtype, device=device)
    if n_inter == 0:
        return lambda x, w_gate, w_up, w_down: torch.zeros_like(x)

    is_fp32 = x.dtype == torch.float32
    if is_fp32:
        dot_mode = CONFIG["FP32_PRECISION"]
    elif x.dtype == torch.bfloat16 and not x.is_cuda:
        dot_mode = "upcast"
    else:
        dot_mode = "native"
    h_fp32 = is_fp32 or CONFIG["H_DTYPE"] == "fp32"
    h_dtype = torch.float32 if h_fp32 else x.dtype
    elt = 4 if is_fp32 else 2
    h_elt = 4 if h_fp32 else 2

    block_m = _block(CONFIG["BLOCK_M"], M)
    block_i = _block(CONFIG["BLOCK_I"], n_inter)
    block_k = _block(CONFIG["BLOCK_K"], n_hidden)
    down_m = block_m
    down_n = _block(CONFIG["DOWN_BLOCK_N"], n_hidden)
    down_k = _block(CONFIG["DOWN_BLOCK_K"], n_inter)
    if is_fp32:
        block_m, block_i = min(block_m, FP32_MAX_BLOCK_MN), min(block_i, FP32_MAX_BLOCK_MN)
        down_m, down_n = min(down_m, FP32_MAX_BLOCK_MN), min(down_n, FP32_MAX_BLOCK_MN)
        block_k, down_k = min(block_k, FP32_MAX_BLOCK_K), min(down_k, FP32_MAX_BLOCK_K)
    while block_m * block_i > GATE_UP_MAX_TILE:
        block_i //= 2
    if x.is_cuda:
        num_sms = torch.cuda.get_device_properties(x.device).multi_processor_count
        block_m, block_i = _fill_sms(M, n_inter, block_m, block_i, num_sms)
        down_m, down_n = _fill_sms(M, n_hidden, down_m, down_n, num_sms)

    # h and out are fresh and contiguous in every call: (M, n_inter) and (M, n_hidden) rows.
    gate_up = launcher(
        _gate_up_kernel,
        (triton.cdiv(M, block_m) * triton.cdiv(n_inter, block_i),),
        (
            M,
            n_inter,
            n_hidden,
            *x2.stride(),
            *w_gate.stride(),
            *w_up.stride(),
            n_inter,  # H row stride
            1,  # H column stride
            block_m,  # BLOCK_M
            block_i,  # BLOCK_I
            block_k,  # BLOCK_K
            CONFIG["GROUP_M"],  # GROUP_M
            dot_mode,  # DOT_MODE
        ),
        {
            "num_warps": CONFIG["num_warps"],
            "num_stages": _stages(CONFIG["num_stages"], (block_m + 2 * block_i) * block_k * elt),
        },
    )
    down = launcher(
        _down_kernel,
        (triton.cdiv(M, down_m) * triton.cdiv(n_hidden, down_n),),
        (
            M,
            n_hidden,
            n_inter,
            n_inter,  # H row stride
            1,  # H column stride
            *w_down.stride(),
            n_hidden,  # out row stride
            1,  # out column stride
            down_m,  # BLOCK_M
            down_n,  # BLOCK_N
            down_k,  # BLOCK_K
            CONFIG["GROUP_M"],  # GROUP_M
            dot_mode,  # DOT_MODE
            h_fp32 and not is_fp32,  # SPLIT_H
        ),
        {
            "num_warps": CONFIG["DOWN_num_warps"],
            "num_stages": _stages(
                CONFIG["DOWN_num_stages"], (down_m * h_elt + down_n * elt) * down_k
            ),
        },
    )

    def run(x: torch.Tensor, w_gate: torch.Tensor, w_up: torch.Tensor, w_down: torch.Tensor):
        x = x if as_is else x.reshape(-1, n_hidden)
        h = torch.empty((M, n_inter), dtype=h_dtype, device=device)
        out = torch.empty(out_shape, dtype=dtype, device=device)
        gate_up(x, w_gate, w_up, h)
        down(h, w_down, out)
        return out

    return run
