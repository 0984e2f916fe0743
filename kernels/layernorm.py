"""LayerNorm over the last dim (biased variance), any leading dims, flattened to rows.

Memory-bound: each element is read and written once when the row fits in registers, so the knobs
are about keeping enough bytes in flight. VARIANT "single" holds a tile of ROWS x
next_pow2(n_cols) in registers and computes the mean, then the variance of (x - mean) from the
registers (two passes over registers, one over memory; never E[x^2] - E[x]^2, which cancels when
the mean is large against the spread). Rows wider than BLOCK_SIZE do not fit, and "single" then
falls back to the chunked loop. VARIANT "chunked" walks the row in CHUNK-column steps, one row
per program, from the 16-byte-aligned address at or before the row (odd widths still load
16-byte vectors): the first sweep computes each step's mean and sum of squared deviations from
registers and merges them into the row's running statistics (Chan et al.), the second sweep
normalizes, so x is read twice. ROWS_PER_PROGRAM packs several narrow rows into one program
(capped so the tile stays within BLOCK_SIZE elements), which matters for head-dim-wide rows.
Statistics and the affine transform are fp32; the result is cast once to x's dtype.
"""

import torch
import triton
import triton.language as tl

from autokernel.launch import launcher, remember

KERNEL_TYPE = "layernorm"
BACKEND = "triton"
# Tunables read by kernel_fn; the built-in tuner rewrites this dict literal, so keep it a literal.
# BLOCK_SIZE: most elements one program holds in registers (columns x rows); CHUNK: column width
# of one step of the chunked walk (on the H200 a wide row wants short steps, 2048-4096).
CONFIG = {
    "VARIANT": "single",
    "BLOCK_SIZE": 8192,
    "CHUNK": 2048,
    "ROWS_PER_PROGRAM": 16,
    "num_warps": 8,
}
# Allowed values per CONFIG key: every combination must be correct (slow is fine, wrong is not).
SEARCH_SPACE = {
    "VARIANT": ["single", "chunked"],
    "BLOCK_SIZE": [1024, 2048, 4096, 8192, 16384, 32768, 65536],
    "CHUNK": [1024, 2048, 4096, 8192, 16384],
    "ROWS_PER_PROGRAM": [1, 2, 4, 8, 16, 32, 64],
    "num_warps": [2, 4, 8, 16, 32],
}

# Launch plans by call signature (shape, strides, dtype, device, 16-byte alignment, CONFIG): all
# that kernel_fn derives from them, and Triton's compiled kernel. A repeat call costs a lookup,
# one allocation and the launch (deriving it all per call cost 35 us of host time on the H200).
_PLANS: dict = {}


@triton.jit
def _layernorm_kernel(
    X_ptr,
    W_ptr,
    B_ptr,
    Y_ptr,
    eps,
    X_row_stride,
    Y_row_stride,
    n_rows,
    n_cols,
    BLOCK_N: tl.constexpr,
    ROWS: tl.constexpr,
    SINGLE: tl.constexpr,
    VEC: tl.constexpr,
):
    pid = tl.program_id(0).to(tl.int64)
    rows = pid * ROWS + tl.arange(0, ROWS)
    row_mask = rows < n_rows
    cols = tl.arange(0, BLOCK_N)
    x_rows = X_ptr + rows[:, None] * X_row_stride
    y_rows = Y_ptr + rows[:, None] * Y_row_stride

    if SINGLE:
        col_mask = cols < n_cols
        mask = row_mask[:, None] & col_mask[None, :]
        x = tl.load(x_rows + cols[None, :], mask=mask, other=0.0).to(tl.float32)
        mean = tl.sum(x, axis=1) / n_cols
        xc = tl.where(mask, x - mean[:, None], 0.0)
        var = tl.sum(xc * xc, axis=1) / n_cols
        rstd = tl.rsqrt(var + eps)
        w = tl.load(W_ptr + cols, mask=col_mask, other=0.0).to(tl.float32)
        b = tl.load(B_ptr + cols, mask=col_mask, other=0.0).to(tl.float32)
        y = xc * rstd[:, None] * w[None, :] + b[None, :]
        tl.store(y_rows + cols[None, :], y.to(Y_ptr.dtype.element_ty), mask=mask)
    else:
        # Odd widths (50257) leave most rows off 16-byte alignment, and a masked load at an
        # unaligned address is split into 2-byte loads. So each row is walked from the
        # aligned address mis elements before it (column c holds x[c - mis]): only the
        # first and last chunk are masked, the chunks between move whole 16-byte vectors.
        row_off = rows[:, None] * X_row_stride
        aligned = (row_off // VEC) * VEC  # the compiler sees this is a multiple of VEC
        mis = row_off - aligned
        x_base = X_ptr + aligned
        y_base = Y_ptr + (rows[:, None] * Y_row_stride // VEC) * VEC
        dense = tl.min(row_mask.to(tl.int32), axis=0) == 1
        n_span = n_cols + tl.max(tl.max(mis, axis=1), axis=0)  # no all-masked extra step
        # Sweep 1: per-chunk (mean, M2) from registers, merged into the row's running pair.
        mean = tl.zeros([ROWS], dtype=tl.float32)
        m2 = tl.zeros([ROWS], dtype=tl.float32)
        n_a = tl.zeros([ROWS], dtype=tl.float32)  # columns merged so far
        for start in range(0, n_span, BLOCK_N):
            c = start + cols[None, :]
            edge = row_mask[:, None] & (c >= mis) & (c < n_cols + mis)
            if dense & (start > 0) & (start + BLOCK_N <= n_cols):
                x = tl.load(x_base + c).to(tl.float32)
            else:
                x = tl.load(x_base + c, mask=edge, other=0.0).to(tl.float32)
            # Columns of this chunk inside the row (0 for a chunk past a row's end).
            lo = tl.maximum(mis, start)
            hi = tl.minimum(n_cols + mis, start + BLOCK_N)
            n_b = tl.sum(tl.maximum(hi - lo, 0), axis=1).to(tl.float32)
            chunk_mean = tl.sum(x, axis=1) / tl.maximum(n_b, 1.0)
            xc = tl.where(edge, x - chunk_mean[:, None], 0.0)
            chunk_m2 = tl.sum(xc * xc, axis=1)
            n_ab = tl.maximum(n_a + n_b, 1.0)
            delta = chunk_mean - mean
            mean = mean + delta * (n_b / n_ab)
            m2 = m2 + chunk_m2 + delta * delta * (n_a * n_b / n_ab)
            n_a = n_a + n_b
        rstd = tl.rsqrt(m2 / n_cols + eps)
        # Sweep 2: normalize, scale, shift.
        for start in range(0, n_span, BLOCK_N):
            c = start + cols[None, :]
            if dense & (start > 0) & (start + BLOCK_N <= n_cols):
                x = tl.load(x_base + c).to(tl.float32)
                w = tl.load(W_ptr + (c - mis)).to(tl.float32)
                b = tl.load(B_ptr + (c - mis)).to(tl.float32)
                y = (x - mean[:, None]) * rstd[:, None] * w + b
                tl.store(y_base + c, y.to(Y_ptr.dtype.element_ty))
            else:
                edge = row_mask[:, None] & (c >= mis) & (c < n_cols + mis)
                x = tl.load(x_base + c, mask=edge, other=0.0).to(tl.float32)
                w = tl.load(W_ptr + (c - mis), mask=edge, other=0.0).to(tl.float32)
                b = tl.load(B_ptr + (c - mis), mask=edge, other=0.0).to(tl.float32)
                y = (x - mean[:, None]) * rstd[:, None] * w + b
                tl.store(y_base + c, y.to(Y_ptr.dtype.element_ty), mask=edge)


def _vec(x2: torch.Tensor, y2: torch.Tensor) -> int:
    """Elements per 16 bytes when x and y rows sit at the same offsets from 16-byte-aligned
    bases (the chunked walk then starts rows at aligned addresses), else 1. Fresh allocations
    are aligned, and x's alignment is part of the plan's key."""
    aligned = x2.data_ptr() % 16 == 0 and y2.data_ptr() % 16 == 0
    return 16 // x2.element_size() if aligned and x2.stride(0) == y2.stride(0) else 1


def _prev_pow2(n: int) -> int:
    return 1 << (max(1, int(n)).bit_length() - 1)


def kernel_fn(
    x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor, eps: float = 1e-5
) -> torch.Tensor:
    key = (
        x.shape,
        x.stride(),
        x.dtype,
        x.device,
        x.data_ptr() % 16,
        weight.shape,
        weight.stride(),
        weight.dtype,
        weight.data_ptr() % 16,
        bias.shape,
        bias.stride(),
        bias.dtype,
        bias.data_ptr() % 16,
        *CONFIG.values(),
    )
    run = _PLANS.get(key)
    if run is None:
        run = remember(_PLANS, key, _plan(x, weight, bias))
    return run(x, weight, bias, eps)


def _plan(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor):
    """run(x, weight, bias, eps) for every call with these arguments' signature (see _PLANS)."""
    shape, dtype, device, n_cols = x.shape, x.dtype, x.device, x.shape[-1]
    if x.numel() == 0:
        return lambda x, weight, bias, eps: torch.empty(shape, dtype=dtype, device=device)
    x2 = x.reshape(-1, n_cols)
    # Rows reachable through x's own pointer: pass x as it is; else every call copies.
    as_is = x2.data_ptr() == x.data_ptr() and x2.stride(-1) == 1
    x2 = x2 if as_is else x2.contiguous()
    y2 = torch.empty(shape, dtype=dtype, device=device).view(-1, n_cols)
    n_rows = x2.shape[0]

    cap = _prev_pow2(CONFIG["BLOCK_SIZE"])
    row_pow2 = _pow2(n_cols)
    single = CONFIG["VARIANT"] == "single" and row_pow2 <= cap
    block_n = row_pow2 if single else min(row_pow2, _prev_pow2(CONFIG["CHUNK"]))
    rows = min(
        _prev_pow2(CONFIG["ROWS_PER_PROGRAM"]),
        max(1, cap // block_n) if block_n >= n_cols else 1,  # a chunked row: one per program
        _pow2(n_rows),
    )
    launch = launcher(
        _layernorm_kernel,
        (_cdiv(n_rows, rows),),
        # X_row_stride, Y_row_stride, n_rows, n_cols, BLOCK_N, ROWS, SINGLE, VEC
        (x2.stride(0), y2.stride(0), n_rows, n_cols, block_n, rows, single, _vec(x2, y2)),
        {"num_warps": CONFIG["num_warps"]},
    )
    contiguous = x.is_contiguous()
    params_contiguous = weight.is_contiguous() and bias.is_contiguous()

    def run(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor, eps: float) -> torch.Tensor:
        if contiguous:
            out = torch.empty_like(x)
        else:
            out = torch.empty(shape, dtype=dtype, device=device)
            x = x if as_is else x.reshape(-1, n_cols).contiguous()
        if not params_contiguous:
            weight, bias = weight.contiguous(), bias.contiguous()
        launch(x, weight, bias, out, float(eps))
        return out

    return run


def _cdiv(a: int, b: int) -> int:
    """ceil(a / b) on the host. triton.cdiv and triton.next_power_of_2 are constexpr functions:
    called from Python each costs microseconds, several per launch, and a narrow-row kernel
    runs in tens of microseconds (the H200 showed 35-75 us of host time per call)."""
    return -(-a // b)


def _pow2(n: int) -> int:
    """The smallest power of two >= n (0 for 0), as triton.next_power_of_2, in plain Python."""
    return 1 << (n - 1).bit_length() if n > 0 else 0
