# expect: FAIL adversarial
"""Planted fault: cos/sin are recomputed in the kernel from the position index (0, 1, 2, ...)
instead of read from the tables the caller passed.

Right whenever the tables start at position 0, as in every sweep size; the adversarial
far_positions case passes tables for positions from 500000 (a long-context model's later
chunk), and the recomputed angles are those of positions 0.. instead.
"""

import torch
import triton
import triton.language as tl

KERNEL_TYPE = "rotary_embedding"
BACKEND = "triton"
# Tunables read by kernel_fn; the built-in tuner rewrites this dict literal, so keep it a literal.
# BLOCK_SEQ: sequence positions per program; HEADS_PER_PROGRAM: (batch, head) slices per program.
CONFIG = {"BLOCK_SEQ": 16, "HEADS_PER_PROGRAM": 4, "num_warps": 4}
# Allowed values per CONFIG key: every combination must be correct (slow is fine, wrong is not).
SEARCH_SPACE = {
    "BLOCK_SEQ": [1, 2, 4, 8, 16, 32, 64, 128],
    "HEADS_PER_PROGRAM": [1, 2, 4, 8, 16],
    "num_warps": [1, 2, 4, 8, 16],
}


@triton.jit
def _rotary_embedding_kernel(
    X_ptr,
    COS_ptr,
    SIN_ptr,
    Y_ptr,
    X_batch_stride,
    X_head_stride,
    X_seq_stride,
    Y_batch_stride,
    Y_head_stride,
    Y_seq_stride,
    COS_seq_stride,
    SIN_seq_stride,
    n_heads,
    n_bh,
    seq_len,
    half,
    n_bh_blocks,
    BLOCK_SEQ: tl.constexpr,
    BLOCK_HALF: tl.constexpr,
    HEADS: tl.constexpr,
    COMPUTE: tl.constexpr,
):
    # Programs sharing a seq block run next to each other: their cos/sin rows stay in L2.
    pid = tl.program_id(0).to(tl.int64)
    pid_bh = pid % n_bh_blocks
    pid_s = pid // n_bh_blocks

    seq = pid_s * BLOCK_SEQ + tl.arange(0, BLOCK_SEQ)
    d = tl.arange(0, BLOCK_HALF)
    tile_mask = (seq < seq_len)[:, None] & (d < half)[None, :]

    # BUG: the angles of positions 0..seq_len-1, whatever the tables say
    inv_freq = tl.exp(-(d.to(COMPUTE) / half) * 9.210340371976184)  # 10000 ** (-2d / head_dim)
    angle = seq[:, None].to(COMPUTE) * inv_freq[None, :]
    cos1 = tl.cos(angle)
    cos2 = cos1
    sin1 = tl.sin(angle)
    sin2 = sin1

    for i in tl.static_range(HEADS):
        bh = pid_bh * HEADS + i
        b = bh // n_heads
        h = bh % n_heads
        mask = tile_mask & (bh < n_bh)
        x_off = b * X_batch_stride + h * X_head_stride + seq[:, None] * X_seq_stride + d[None, :]
        y_off = b * Y_batch_stride + h * Y_head_stride + seq[:, None] * Y_seq_stride + d[None, :]
        x1 = tl.load(X_ptr + x_off, mask=mask, other=0.0).to(COMPUTE)
        x2 = tl.load(X_ptr + x_off + half, mask=mask, other=0.0).to(COMPUTE)
        y1 = x1 * cos1 - x2 * sin1
        y2 = x2 * cos2 + x1 * sin2
        tl.store(Y_ptr + y_off, y1.to(Y_ptr.dtype.element_ty), mask=mask)
        tl.store(Y_ptr + y_off + half, y2.to(Y_ptr.dtype.element_ty), mask=mask)


def kernel_fn(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    batch, n_heads, seq_len, head_dim = x.shape
    if head_dim % 2:
        raise ValueError(f"head_dim must be even, got {head_dim}")
    out = torch.empty(x.shape, dtype=x.dtype, device=x.device)
    if out.numel() == 0:
        return out
    if x.stride(-1) != 1:
        x = x.contiguous()
    cos = cos.reshape(seq_len, head_dim)
    sin = sin.reshape(seq_len, head_dim)
    if cos.stride(-1) != 1:
        cos = cos.contiguous()
    if sin.stride(-1) != 1:
        sin = sin.contiguous()

    half = head_dim // 2
    n_bh = batch * n_heads
    block_seq = min(CONFIG["BLOCK_SEQ"], triton.next_power_of_2(seq_len))
    heads = min(CONFIG["HEADS_PER_PROGRAM"], n_bh)
    n_bh_blocks = triton.cdiv(n_bh, heads)
    grid = (n_bh_blocks * triton.cdiv(seq_len, block_seq),)
    compute = tl.float32 if x.dtype in (torch.float16, torch.bfloat16) else tl.float64
    _rotary_embedding_kernel[grid](
        x,
        cos,
        sin,
        out,
        x.stride(0),
        x.stride(1),
        x.stride(2),
        out.stride(0),
        out.stride(1),
        out.stride(2),
        cos.stride(0),
        sin.stride(0),
        n_heads,
        n_bh,
        seq_len,
        half,
        n_bh_blocks,
        BLOCK_SEQ=block_seq,
        BLOCK_HALF=triton.next_power_of_2(half),
        HEADS=heads,
        COMPUTE=compute,
        num_warps=CONFIG["num_warps"],
    )
    return out
