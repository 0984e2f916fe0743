"""Flash attention forward: softmax(Q K^T * sm_scale [+ causal or attn_mask]) V, grouped-query K/V.

Each program owns BLOCK_M query rows of one (batch, head) and streams the keys and values in
BLOCK_N blocks with the online softmax: a running row max m, running sum l and an fp32
accumulator rescaled by exp2(m_old - m_new) whenever the max grows, so the full score matrix
never exists. log2(e) is folded into the scale so the exponentials are exp2. Query head h reads
key/value head h // (heads // kv_heads). The causal mask is top-left aligned (query i sees keys
0..i); key blocks wholly above the diagonal are skipped, and with VARIANT "split_diagonal" the
blocks wholly below it run without any mask arithmetic, leaving masks to the diagonal and
sequence-tail blocks ("mask_all" masks every block: simpler, more work per block). Rows whose
keys are all masked in a block keep m = -inf; a guard keeps -inf - -inf from making NaN.

attn_mask is scaled_dot_product_attention's (bool: which keys a query sees; floating: added to
the scaled scores), read through its broadcast strides, so Hugging Face's expanded padding
masks (stride 0 over queries or heads) are read from the one row they hold. An additive mask is
clamped at -1e30 before the log2(e) factor: finfo.min * log2(e) overflows fp32 to -inf, which
would turn a row of finfo.min (a uniform average) into a row that sees nothing (zeros).

The scale is applied to the fp32 scores, never folded into a half-precision Q (that would round
scores of +-hundreds by ~0.1). For fp16/bf16, P is rounded to V's dtype before the P @ V dot, as
flash kernels do; fp32 inputs use "tf32x3" or "ieee" dots (TF32 misses the 1e-4 tolerance).
BLOCK_M trades K/V re-reads against registers; BLOCK_N and num_stages set the K/V pipeline.
"""

import torch
import triton
import triton.language as tl

from autokernel.launch import launcher, remember

KERNEL_TYPE = "flash_attention"
BACKEND = "triton"
# Tunables read by kernel_fn; the built-in tuner rewrites this dict literal, so keep it a literal.
CONFIG = {
    "VARIANT": "split_diagonal",
    "BLOCK_M": 128,
    "BLOCK_N": 64,
    "num_warps": 8,
    "num_stages": 3,
    "FP32_PRECISION": "tf32x3",  # fp32 inputs only: "tf32x3" | "ieee"
}
# Allowed values per CONFIG key: every combination must be correct (slow is fine, wrong is not).
SEARCH_SPACE = {
    "VARIANT": ["split_diagonal", "mask_all"],
    "BLOCK_M": [16, 32, 64, 128],
    "BLOCK_N": [16, 32, 64, 128],
    "num_warps": [4, 8],
    "num_stages": [1, 2, 3, 4],
    "FP32_PRECISION": ["tf32x3"],
}

# Launch plans by call signature (shape, strides, dtype, device, 16-byte alignment, CONFIG): all
# that kernel_fn derives from them, and Triton's compiled kernel. A repeat call costs a lookup,
# one allocation and the launch (deriving it all per call cost 35 us of host time on the H200).
_PLANS: dict = {}
# FP32_PRECISION "ieee" is correct but left out: at head_dim 128 its FMA dots spill registers
# even in 32x32 tiles (sm_90 compile), where tf32x3 spills nothing.

LOG2E = 1.4426950408889634
SMEM_BYTES = 200 * 1024  # Q tile + K/V pipeline buffers per program; the H200 allows 227 KB
FP32_MAX_BLOCK = 32  # fp32 tiles at head_dim 128 spill registers beyond 32x32


@triton.jit
def _dot(a, b, acc, DOT_MODE: tl.constexpr):
    """acc + a @ b (fp32 accumulator) in the precision DOT_MODE names."""
    if DOT_MODE == "upcast":
        # The interpreter multiplies bf16 as raw integers: widen first (exact).
        out = tl.dot(a.to(tl.float32), b.to(tl.float32), acc, input_precision="ieee")
    elif DOT_MODE == "native":
        out = tl.dot(a, b, acc)  # fp16/bf16 operands on tensor cores
    else:
        out = tl.dot(a, b, acc, input_precision=DOT_MODE)  # fp32: "tf32x3" or "ieee"
    return out


@triton.jit
def _log2_bias(M_ptrs, in_bounds, MASK_BOOL: tl.constexpr):
    """attn_mask at M_ptrs as an additive bias in log2 units: a bool mask gives 0 where a key is
    seen and -inf where not; a float bias is clamped at -1e30 first, since finfo.min * log2(e)
    overflows fp32 to -inf and would turn a row of finfo.min (a uniform average) into zeros."""
    if MASK_BOOL:
        seen = tl.load(M_ptrs, mask=in_bounds, other=0)
        out = tl.where(seen != 0, 0.0, float("-inf"))
    else:
        bias = tl.load(M_ptrs, mask=in_bounds, other=float("-inf")).to(tl.float32)
        scaled = tl.maximum(bias, -1e30) * 1.4426950408889634  # log2(e)
        out = tl.where(bias == float("-inf"), bias, scaled)
    return out


@triton.jit
def _add_bias(qk, bias, MASK_BOOL: tl.constexpr):
    """qk + bias; where a bool mask hides a key the score is -inf even if qk is NaN, as SDPA's
    masked_fill gives (a float mask is added, NaN stays NaN, as SDPA adds it)."""
    if MASK_BOOL:
        qk = tl.where(bias == float("-inf"), bias, qk)
    else:
        qk = qk + bias
    return qk


@triton.jit
def _attend_blocks(acc, l_i, m_i, q, K_base, V_base, K_seq_stride, K_dim_stride, V_seq_stride,
                   V_dim_stride, offs_m, offs_d, seq_q, seq_k, qk_scale, lo, hi, M_base,
                   M_q_stride, M_k_stride, MASKED: tl.constexpr, CAUSAL: tl.constexpr,
                   MASK_MODE: tl.constexpr, MASK_BOOL: tl.constexpr, HEAD_DIM: tl.constexpr,
                   BLOCK_D: tl.constexpr, BLOCK_N: tl.constexpr,
                   DOT_MODE: tl.constexpr):  # fmt: skip
    """Fold the key/value blocks [lo, hi) into the running (acc, l_i, m_i) of the online softmax.
    MASKED False: every key in [lo, hi) is visible to every row of the tile. MASK_MODE 0: no
    attn_mask; 1: read as a tile per key block; 2: as one column (see _mask_mode)."""
    offs_n_base = tl.arange(0, BLOCK_N)
    if MASK_MODE == 2:
        # Constant along keys: one column, loaded once for all key blocks. Read as a tile, such
        # a mask is contiguous along queries, not keys, and Triton (3.7, sm_90 PTX) moves every
        # tile through shared memory into the MMA layout, with barriers, once per key block.
        col_ptrs = M_base + offs_m.to(tl.int64) * M_q_stride
        col = _log2_bias(col_ptrs, offs_m < seq_q, MASK_BOOL)
    for start_n in range(lo, hi, BLOCK_N):
        offs_n = start_n + offs_n_base
        offs_n64 = offs_n.to(tl.int64)
        k_ptrs = K_base + offs_n64[:, None] * K_seq_stride + offs_d[None, :] * K_dim_stride
        v_ptrs = V_base + offs_n64[:, None] * V_seq_stride + offs_d[None, :] * V_dim_stride
        if MASKED:
            kv_mask = offs_n[:, None] < seq_k
            if BLOCK_D != HEAD_DIM:
                kv_mask = kv_mask & (offs_d[None, :] < HEAD_DIM)
            k = tl.load(k_ptrs, mask=kv_mask, other=0.0)
            v = tl.load(v_ptrs, mask=kv_mask, other=0.0)
        elif BLOCK_D != HEAD_DIM:
            d_mask = offs_d[None, :] < HEAD_DIM
            k = tl.load(k_ptrs, mask=d_mask, other=0.0)
            v = tl.load(v_ptrs, mask=d_mask, other=0.0)
        else:
            k = tl.load(k_ptrs)
            v = tl.load(v_ptrs)

        qk = _dot(q, tl.trans(k), tl.zeros((q.shape[0], BLOCK_N), dtype=tl.float32), DOT_MODE)
        qk = qk * qk_scale  # log2 units: scores * sm_scale * log2(e)
        if MASKED:
            visible = offs_n[None, :] < seq_k
            if CAUSAL:
                visible = visible & (offs_n[None, :] <= offs_m[:, None])
            qk = tl.where(visible, qk, float("-inf"))
        if MASK_MODE == 1:
            m_rows = offs_m.to(tl.int64)[:, None] * M_q_stride
            m_ptrs = M_base + m_rows + offs_n64[None, :] * M_k_stride
            in_bounds = (offs_m[:, None] < seq_q) & (offs_n[None, :] < seq_k)
            if MASK_BOOL:
                seen = tl.load(m_ptrs, mask=in_bounds, other=0)
                qk = tl.where(seen != 0, qk, float("-inf"))
            else:
                qk = qk + _log2_bias(m_ptrs, in_bounds, MASK_BOOL)
        elif MASK_MODE == 2:
            qk = _add_bias(qk, col[:, None], MASK_BOOL)

        m_new = tl.maximum(m_i, tl.max(qk, 1))
        # A row with no visible key so far has m_new = -inf: subtract 0 instead, so that
        # exp2(-inf - 0) = 0 rather than exp2(-inf + inf) = NaN.
        m_safe = tl.where(m_new == float("-inf"), 0.0, m_new)
        p = tl.exp2(qk - m_safe[:, None])
        alpha = tl.exp2(m_i - m_safe)
        l_i = l_i * alpha + tl.sum(p, 1)
        acc = acc * alpha[:, None]
        acc = _dot(p.to(V_base.dtype.element_ty), v, acc, DOT_MODE)
        m_i = m_new
    return acc, l_i, m_i


@triton.jit
def _flash_attention_kernel(
    Q_ptr,
    K_ptr,
    V_ptr,
    O_ptr,
    qk_scale,
    Mask_ptr,  # read only when MASK_MODE != 0
    n_heads,
    group,
    seq_q,
    seq_k,
    Q_batch_stride,
    Q_head_stride,
    Q_seq_stride,
    Q_dim_stride,
    K_batch_stride,
    K_head_stride,
    K_seq_stride,
    K_dim_stride,
    V_batch_stride,
    V_head_stride,
    V_seq_stride,
    V_dim_stride,
    O_batch_stride,
    O_head_stride,
    O_seq_stride,
    O_dim_stride,
    M_batch_stride,
    M_head_stride,
    M_q_stride,
    M_k_stride,
    CAUSAL: tl.constexpr,
    MASK_MODE: tl.constexpr,  # 0: no mask; 1: read as a tile per block; 2: as one column
    MASK_BOOL: tl.constexpr,
    SPLIT_DIAGONAL: tl.constexpr,
    HEAD_DIM: tl.constexpr,
    BLOCK_D: tl.constexpr,
    BLOCK_M: tl.constexpr,
    BLOCK_N: tl.constexpr,
    DOT_MODE: tl.constexpr,
):
    start_m = tl.program_id(0)
    bh = tl.program_id(1).to(tl.int64)
    batch = bh // n_heads
    head = bh % n_heads
    kv_head = head // group
    Q_base = Q_ptr + batch * Q_batch_stride + head * Q_head_stride
    K_base = K_ptr + batch * K_batch_stride + kv_head * K_head_stride
    V_base = V_ptr + batch * V_batch_stride + kv_head * V_head_stride
    O_base = O_ptr + batch * O_batch_stride + head * O_head_stride
    M_base = Mask_ptr + batch * M_batch_stride + head * M_head_stride

    offs_m = start_m * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_d = tl.arange(0, BLOCK_D)
    offs_m64 = offs_m.to(tl.int64)
    row_mask = offs_m[:, None] < seq_q
    if BLOCK_D != HEAD_DIM:
        row_mask = row_mask & (offs_d[None, :] < HEAD_DIM)
    q_ptrs = Q_base + offs_m64[:, None] * Q_seq_stride + offs_d[None, :] * Q_dim_stride
    q = tl.load(q_ptrs, mask=row_mask, other=0.0)

    m_i = tl.full((BLOCK_M,), float("-inf"), dtype=tl.float32)
    l_i = tl.zeros((BLOCK_M,), dtype=tl.float32)
    acc = tl.zeros((BLOCK_M, BLOCK_D), dtype=tl.float32)

    if CAUSAL:
        # Keys past the tile's last row are masked for every row: never visit them.
        hi = tl.minimum(seq_k, (start_m + 1) * BLOCK_M)
        # Key blocks ending at or before the tile's first row are visible to all its rows.
        n_full = tl.minimum(start_m * BLOCK_M + 1, seq_k) // BLOCK_N
    else:
        hi = seq_k
        n_full = seq_k // BLOCK_N
    lo = 0
    if SPLIT_DIAGONAL:
        lo = n_full * BLOCK_N
        acc, l_i, m_i = _attend_blocks(
            acc, l_i, m_i, q, K_base, V_base, K_seq_stride, K_dim_stride, V_seq_stride,
            V_dim_stride, offs_m, offs_d, seq_q, seq_k, qk_scale, 0, lo, M_base, M_q_stride,
            M_k_stride, False, CAUSAL, MASK_MODE, MASK_BOOL, HEAD_DIM, BLOCK_D, BLOCK_N, DOT_MODE,
        )  # fmt: skip
    acc, l_i, m_i = _attend_blocks(
        acc, l_i, m_i, q, K_base, V_base, K_seq_stride, K_dim_stride, V_seq_stride, V_dim_stride,
        offs_m, offs_d, seq_q, seq_k, qk_scale, lo, hi, M_base, M_q_stride, M_k_stride,
        True, CAUSAL, MASK_MODE, MASK_BOOL, HEAD_DIM, BLOCK_D, BLOCK_N, DOT_MODE,
    )  # fmt: skip

    l_safe = tl.where(l_i == 0.0, 1.0, l_i)  # rows that see no key: zeros, as torch gives
    out = acc / l_safe[:, None]
    o_ptrs = O_base + offs_m64[:, None] * O_seq_stride + offs_d[None, :] * O_dim_stride
    tl.store(o_ptrs, out.to(O_ptr.dtype.element_ty), mask=row_mask)


def _block(cap: int, dim: int) -> int:
    """The CONFIG block, shrunk to the dimension's power of two; tl.dot needs at least 16."""
    return min(cap, max(16, triton.next_power_of_2(dim)))


def kernel_fn(
    Q: torch.Tensor,
    K: torch.Tensor,
    V: torch.Tensor,
    causal: bool = True,
    sm_scale: float | None = None,
    attn_mask: torch.Tensor | None = None,
) -> torch.Tensor:
    mask_key = None
    if attn_mask is not None:
        mask_key = (attn_mask.shape, attn_mask.stride(), attn_mask.dtype, attn_mask.data_ptr() % 16)
    key = (Q.shape, Q.stride(), Q.dtype, Q.device, Q.data_ptr() % 16,
           K.shape, K.stride(), K.dtype, K.data_ptr() % 16,
           V.shape, V.stride(), V.dtype, V.data_ptr() % 16,
           bool(causal), mask_key, *CONFIG.values())  # fmt: skip
    run = _PLANS.get(key)
    if run is None:
        run = remember(_PLANS, key, _plan(Q, K, V, bool(causal), attn_mask))
    return run(Q, K, V, sm_scale, attn_mask)


def _mask_view(attn_mask: torch.Tensor, Q: torch.Tensor, seq_k: int) -> torch.Tensor:
    """attn_mask broadcast to (batch, heads, seq_q, seq_k) without a copy (stride-0 dims), bool
    read as bytes."""
    if attn_mask.dtype != torch.bool and not attn_mask.is_floating_point():
        raise ValueError(f"attn_mask must be bool or floating, not {attn_mask.dtype}")
    batch, heads, seq_q, _ = Q.shape
    view = attn_mask.expand(batch, heads, seq_q, seq_k)
    return view.view(torch.uint8) if view.dtype == torch.bool else view


def _mask_mode(strides: tuple) -> int:
    """How the kernel reads a mask with these (batch, head, query, key) strides: 2, one column
    per tile where it is the same for every key (stride 0 over keys, as Hugging Face 5.17 lays
    out its all-ones mask under torch.compile); else 1, a tile per key block."""
    return 2 if strides[3] == 0 else 1


def _plan(
    Q: torch.Tensor, K: torch.Tensor, V: torch.Tensor, causal: bool, mask: torch.Tensor | None
):
    """run(Q, K, V, sm_scale, mask) for every call with their signature (see _PLANS)."""
    batch, n_heads, seq_q, head_dim = Q.shape
    kv_heads, seq_k = K.shape[1], K.shape[2]
    if n_heads % kv_heads:
        raise ValueError(
            f"query heads ({n_heads}) must be a multiple of key/value heads ({kv_heads})"
        )
    if K.shape != V.shape or K.shape[0] != batch or K.shape[3] != head_dim:
        raise ValueError(
            f"K {tuple(K.shape)} and V {tuple(V.shape)} do not match Q {tuple(Q.shape)}"
        )
    if CONFIG["VARIANT"] not in ("split_diagonal", "mask_all"):
        raise ValueError(f"unknown VARIANT {CONFIG['VARIANT']!r}")
    # Contiguous, as the model-side op promises torch.compile (not Q's layout).
    out = torch.empty(Q.shape, dtype=Q.dtype, device=Q.device)
    if out.numel() == 0:
        return lambda Q, K, V, sm_scale, mask: torch.empty(Q.shape, dtype=Q.dtype, device=Q.device)
    mask_strides = tuple(_mask_view(mask, Q, seq_k).stride()) if mask is not None else (0,) * 4
    # The kernel never reads the mask pointer without a mask: one stand-in per plan, so an
    # unmasked call allocates nothing for it.
    no_mask = Q.new_empty(1)
    default_scale = head_dim**-0.5

    if Q.dtype == torch.float32:
        dot_mode = CONFIG["FP32_PRECISION"]
    elif Q.dtype == torch.bfloat16 and not Q.is_cuda:
        dot_mode = "upcast"
    else:
        dot_mode = "native"
    block_m = _block(CONFIG["BLOCK_M"], seq_q)
    block_n = _block(CONFIG["BLOCK_N"], seq_k)
    block_d = max(16, triton.next_power_of_2(head_dim))
    is_fp32 = Q.dtype == torch.float32
    if is_fp32:
        block_m, block_n = min(block_m, FP32_MAX_BLOCK), min(block_n, FP32_MAX_BLOCK)
    # Shared memory holds the Q tile (twice for fp32: tf32x3 keeps a split copy) and num_stages
    # K/V block pairs; lower num_stages until they fit.
    elt = 4 if is_fp32 else 2
    q_bytes = block_m * block_d * elt * (2 if is_fp32 else 1)
    stage_bytes = 2 * block_n * block_d * elt
    num_stages = max(1, min(CONFIG["num_stages"], (SMEM_BYTES - q_bytes) // stage_bytes))

    launch = launcher(
        _flash_attention_kernel,
        (triton.cdiv(seq_q, block_m), batch * n_heads),
        (
            n_heads,
            n_heads // kv_heads,
            seq_q,
            seq_k,
            *Q.stride(),
            *K.stride(),
            *V.stride(),
            *out.stride(),
            *mask_strides,
            causal,  # CAUSAL
            _mask_mode(mask_strides) if mask is not None else 0,  # MASK_MODE
            mask is not None and mask.dtype == torch.bool,  # MASK_BOOL
            CONFIG["VARIANT"] == "split_diagonal",  # SPLIT_DIAGONAL
            head_dim,  # HEAD_DIM
            block_d,  # BLOCK_D
            block_m,  # BLOCK_M
            block_n,  # BLOCK_N
            dot_mode,  # DOT_MODE
        ),
        {"num_warps": CONFIG["num_warps"], "num_stages": num_stages},
    )

    def run(Q, K, V, sm_scale: float | None, mask: torch.Tensor | None) -> torch.Tensor:
        out = torch.empty(Q.shape, dtype=Q.dtype, device=Q.device)
        scale = sm_scale if sm_scale is not None else default_scale  # a Python float
        view = no_mask if mask is None else _mask_view(mask, Q, seq_k)
        launch(Q, K, V, out, scale * LOG2E, view)
        return out

    return run
