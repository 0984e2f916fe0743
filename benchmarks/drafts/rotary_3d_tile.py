"""DRAFT, measured on the H200 at 4031f9c (h200-sweep-2026-12-03-4031f9c.json): all
HEADS_PER_PROGRAM slices in one 3-D tile, so every load is issued before the first store (the
shipped per-head loop interleaves loads and stores in the PTX). Best 74.2 us against 74.0 us for
the shipped kernel's best config in the same run: no gain. The text below is the starter's.

Rotary position embedding (LLaMA rotate_half convention) on x (batch, heads, seq, head_dim).

With h = head_dim / 2, x1 = x[..., :h], x2 = x[..., h:]:
    out[..., :h] = x1 * cos[:, :h] - x2 * sin[:, :h]
    out[..., h:] = x2 * cos[:, h:] + x1 * sin[:, h:]
The two halves are separate [BLOCK_SEQ, BLOCK_HALF] tiles (BLOCK_HALF = next_pow2(h)), so
head_dim need not be a power of two (80, 96). Both halves of the cos/sin tables are read as
given. Memory-bound: one program loads the cos/sin tile for BLOCK_SEQ positions once and applies
it to HEADS_PER_PROGRAM (batch, head) slices, so the tables are not re-read per head;
BLOCK_SEQ x HEADS_PER_PROGRAM sets the bytes in flight per program. x may be strided (e.g. q
after a (b, s, h, d) transpose) as long as head_dim is contiguous. Arithmetic is fp32, where
products of two half-precision significands are exact.
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
):
    # Programs sharing a seq block run next to each other: their cos/sin rows stay in L2.
    pid = tl.program_id(0).to(tl.int64)
    pid_bh = pid % n_bh_blocks
    pid_s = pid // n_bh_blocks

    seq = pid_s * BLOCK_SEQ + tl.arange(0, BLOCK_SEQ)
    d = tl.arange(0, BLOCK_HALF)
    tile_mask = (seq < seq_len)[:, None] & (d < half)[None, :]

    cos_row = COS_ptr + seq[:, None] * COS_seq_stride + d[None, :]
    sin_row = SIN_ptr + seq[:, None] * SIN_seq_stride + d[None, :]
    cos1 = tl.load(cos_row, mask=tile_mask, other=0.0).to(tl.float32)
    cos2 = tl.load(cos_row + half, mask=tile_mask, other=0.0).to(tl.float32)
    sin1 = tl.load(sin_row, mask=tile_mask, other=0.0).to(tl.float32)
    sin2 = tl.load(sin_row + half, mask=tile_mask, other=0.0).to(tl.float32)

    # All HEADS slices in one 3-D tile: every load of the program is issued before the first
    # store, so each thread has HEADS times the bytes in flight of a per-head loop.
    bh = pid_bh * HEADS + tl.arange(0, HEADS)
    base_x = (bh // n_heads) * X_batch_stride + (bh % n_heads) * X_head_stride
    base_y = (bh // n_heads) * Y_batch_stride + (bh % n_heads) * Y_head_stride
    mask = tile_mask[None, :, :] & (bh < n_bh)[:, None, None]
    x_off = base_x[:, None, None] + (seq[:, None] * X_seq_stride + d[None, :])[None, :, :]
    y_off = base_y[:, None, None] + (seq[:, None] * Y_seq_stride + d[None, :])[None, :, :]
    x1 = tl.load(X_ptr + x_off, mask=mask, other=0.0).to(tl.float32)
    x2 = tl.load(X_ptr + x_off + half, mask=mask, other=0.0).to(tl.float32)
    y1 = x1 * cos1[None, :, :] - x2 * sin1[None, :, :]
    y2 = x2 * cos2[None, :, :] + x1 * sin2[None, :, :]
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
    block_seq = min(CONFIG["BLOCK_SEQ"], _pow2(seq_len))
    heads = min(CONFIG["HEADS_PER_PROGRAM"], _pow2(n_bh))  # a power of two: a tile dim
    n_bh_blocks = _cdiv(n_bh, heads)
    grid = (n_bh_blocks * _cdiv(seq_len, block_seq),)
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
        BLOCK_HALF=_pow2(half),
        HEADS=heads,
        num_warps=CONFIG["num_warps"],
    )
    return out


def _cdiv(a: int, b: int) -> int:
    """ceil(a / b) on the host. triton.cdiv and triton.next_power_of_2 are constexpr functions:
    called from Python each costs microseconds, several per launch, and a narrow-row kernel
    runs in tens of microseconds (the H200 showed 35-75 us of host time per call)."""
    return -(-a // b)


def _pow2(n: int) -> int:
    """The smallest power of two >= n (0 for 0), as triton.next_power_of_2, in plain Python."""
    return 1 << (n - 1).bit_length() if n > 0 else 0
