"""Rotary position embedding (LLaMA rotate_half convention) on x (batch, heads, seq, head_dim).

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

from autokernel.launch import launcher, remember

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

# Launch plans by call signature (shape, strides, dtype, device, 16-byte alignment, CONFIG): all
# that kernel_fn derives from them, and Triton's compiled kernel. A repeat call costs a lookup,
# one allocation and the launch (deriving it all per call cost 35 us of host time on the H200).
_PLANS: dict = {}


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

    for i in tl.static_range(HEADS):
        bh = pid_bh * HEADS + i
        b = bh // n_heads
        h = bh % n_heads
        mask = tile_mask & (bh < n_bh)
        x_off = b * X_batch_stride + h * X_head_stride + seq[:, None] * X_seq_stride + d[None, :]
        y_off = b * Y_batch_stride + h * Y_head_stride + seq[:, None] * Y_seq_stride + d[None, :]
        x1 = tl.load(X_ptr + x_off, mask=mask, other=0.0).to(tl.float32)
        x2 = tl.load(X_ptr + x_off + half, mask=mask, other=0.0).to(tl.float32)
        y1 = x1 * cos1 - x2 * sin1
        y2 = x2 * cos2 + x1 * sin2
        tl.store(Y_ptr + y_off, y1.to(Y_ptr.dtype.element_ty), mask=mask)
        tl.store(Y_ptr + y_off + half, y2.to(Y_ptr.dtype.element_ty), mask=mask)


def kernel_fn(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    key = (
        x.shape,
        x.stride(),
        x.dtype,
        x.device,
        x.data_ptr() % 16,
        cos.shape,
        cos.stride(),
        cos.dtype,
        cos.data_ptr() % 16,
        sin.shape,
        sin.stride(),
        sin.dtype,
        sin.data_ptr() % 16,
        *CONFIG.values(),
    )
    run = _PLANS.get(key)
    if run is None:
        run = remember(_PLANS, key, _plan(x, cos, sin))
    return run(x, cos, sin)


def _plan(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor):
    """run(x, cos, sin) for every call with their signature (see _PLANS)."""
    batch, n_heads, seq_len, head_dim = x.shape
    if head_dim % 2:
        raise ValueError(f"head_dim must be even, got {head_dim}")
    shape, dtype, device = x.shape, x.dtype, x.device
    if x.numel() == 0:
        return lambda x, cos, sin: torch.empty(shape, dtype=dtype, device=device)
    copy_x = x.stride(-1) != 1
    x = x.contiguous() if copy_x else x
    cos2, sin2 = _table(cos, seq_len, head_dim), _table(sin, seq_len, head_dim)
    # A table whose (seq, head_dim) rows are reachable through its own pointer is passed as
    # it is; any other is copied by every call.
    cos_as_is = cos2.data_ptr() == cos.data_ptr()
    sin_as_is = sin2.data_ptr() == sin.data_ptr()
    out = torch.empty(shape, dtype=dtype, device=device)

    half = head_dim // 2
    n_bh = batch * n_heads
    block_seq = min(CONFIG["BLOCK_SEQ"], _pow2(seq_len))
    heads = min(CONFIG["HEADS_PER_PROGRAM"], n_bh)
    n_bh_blocks = _cdiv(n_bh, heads)
    launch = launcher(
        _rotary_embedding_kernel,
        (n_bh_blocks * _cdiv(seq_len, block_seq),),
        (
            *x.stride()[:3],  # X_batch_stride, X_head_stride, X_seq_stride
            *out.stride()[:3],  # Y_batch_stride, Y_head_stride, Y_seq_stride
            cos2.stride(0),
            sin2.stride(0),
            n_heads,
            n_bh,
            seq_len,
            half,
            n_bh_blocks,
            block_seq,  # BLOCK_SEQ
            _pow2(half),  # BLOCK_HALF
            heads,  # HEADS
        ),
        {"num_warps": CONFIG["num_warps"]},
    )
    contiguous = x.is_contiguous()

    def run(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
        if contiguous and not copy_x:
            out = torch.empty_like(x)
        else:
            out = torch.empty(shape, dtype=dtype, device=device)
            x = x.contiguous() if copy_x else x
        cos = cos if cos_as_is else _table(cos, seq_len, head_dim)
        sin = sin if sin_as_is else _table(sin, seq_len, head_dim)
        launch(x, cos, sin, out)
        return out

    return run


def _table(t: torch.Tensor, seq_len: int, head_dim: int) -> torch.Tensor:
    """cos or sin as (seq_len, head_dim) rows of unit column stride."""
    t = t.reshape(seq_len, head_dim)
    return t if t.stride(-1) == 1 else t.contiguous()


def _cdiv(a: int, b: int) -> int:
    """ceil(a / b) on the host. triton.cdiv and triton.next_power_of_2 are constexpr functions:
    called from Python each costs microseconds, several per launch, and a narrow-row kernel
    runs in tens of microseconds (the H200 showed 35-75 us of host time per call)."""
    return -(-a // b)


def _pow2(n: int) -> int:
    """The smallest power of two >= n (0 for 0), as triton.next_power_of_2, in plain Python."""
    return 1 << (n - 1).bit_length() if n > 0 else 0
