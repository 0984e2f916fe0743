"""Row softmax over the last dim: y = exp(x - max(x)) / sum(exp(x - max(x))), in fp32.

Memory-bound: the ideal kernel reads x once and writes y once. Two algorithms, picked per call:
"single" holds a whole row in registers (one read of x) while next_pow2(n_cols) fits under
MAX_SINGLE_COLS, else it falls back to "online"; "online" walks the row in BLOCK_SIZE-column
chunks twice, first keeping a running max and a rescaled running sum, then normalizing and
storing. The second read hits L2 only while the rows in flight fit in it (4096 rows of 50257 do
not: that size runs near 54 % of copy on the H200). It walks from the 16-byte-aligned address at
or before each row, so odd widths still load 16-byte vectors. Narrow rows put several rows in
one [ROWS, COLS] tile (at most ROWS_PER_PROGRAM, and about BLOCK_SIZE elements per tile), so
each program moves enough bytes to hide latency; num_warps is capped by the tile so tiny tiles
are not over-split. "split" spreads each row over several programs (SPLIT_CHUNK columns each),
so a few very wide rows still fill the GPU: one kernel writes each chunk's fp32 max and sum of
exp(x - max) to a small workspace; a second merges the row's partials (log-sum-exp) and re-reads
its chunk to write exp(x - m) / s. That reads x twice from DRAM (the re-read comes a whole
kernel later, too late for L2); rows no wider than SPLIT_CHUNK take the "single" path instead.
"""

import torch
import triton
import triton.language as tl

from autokernel.launch import launcher, remember

KERNEL_TYPE = "softmax"
BACKEND = "triton"
# Tunables read by kernel_fn; the built-in tuner rewrites this dict literal, so keep it a literal.
# BLOCK_SIZE: elements per tile (online chunk width, and the row-group size for narrow rows);
# MAX_SINGLE_COLS: widest padded row the "single" variant keeps in registers (columns);
# SPLIT_CHUNK: columns per program in "split" (walked in tiles of at most BLOCK_SIZE).
CONFIG = {
    "VARIANT": "single",
    "SPLIT_CHUNK": 4096,
    "BLOCK_SIZE": 4096,
    "MAX_SINGLE_COLS": 16384,
    "ROWS_PER_PROGRAM": 16,
    "num_warps": 8,
}
# Allowed values per CONFIG key: every combination must be correct (slow is fine, wrong is not).
SEARCH_SPACE = {
    "VARIANT": ["single", "split", "online"],
    "SPLIT_CHUNK": [1024, 2048, 4096, 8192, 16384],
    "BLOCK_SIZE": [512, 1024, 2048, 4096, 8192],
    "MAX_SINGLE_COLS": [2048, 4096, 8192, 16384],
    "ROWS_PER_PROGRAM": [1, 2, 4, 8, 16, 32],
    "num_warps": [1, 2, 4, 8, 16, 32],
}

# Launch plans by call signature (shape, strides, dtype, device, 16-byte alignment, CONFIG): all
# that kernel_fn derives from them, and Triton's compiled kernel. A repeat call costs a lookup,
# one allocation and the launch (deriving it all per call cost 35 us of host time on the H200).
_PLANS: dict = {}


@triton.jit
def _softmax_kernel(
    X_ptr,
    Y_ptr,
    X_row_stride,
    Y_row_stride,
    n_rows,
    n_cols,
    BLOCK_COLS: tl.constexpr,
    ROWS: tl.constexpr,
    SINGLE: tl.constexpr,
    VEC: tl.constexpr,
):
    pid = tl.program_id(0).to(tl.int64)
    rows = pid * ROWS + tl.arange(0, ROWS)
    row_mask = (rows < n_rows)[:, None]
    # Rows past the end re-read the last row (never stored), so padding rows hold real values
    # and no -inf - -inf NaN is ever computed for them.
    x_row = X_ptr + tl.minimum(rows, n_rows - 1)[:, None] * X_row_stride
    y_row = Y_ptr + rows[:, None] * Y_row_stride
    cols = tl.arange(0, BLOCK_COLS)[None, :]
    if SINGLE:
        # The whole row is one tile: one read, one write. An all -inf row gives NaN (torch too).
        col_mask = cols < n_cols
        x = tl.load(x_row + cols, mask=col_mask, other=-float("inf")).to(tl.float32)
        m = tl.max(x, axis=1)
        e = tl.exp(x - m[:, None])
        y = e * (1.0 / tl.sum(e, axis=1))[:, None]
        tl.store(y_row + cols, y.to(Y_ptr.dtype.element_ty), mask=row_mask & col_mask)
    else:
        # Odd widths (50257) leave most rows off 16-byte alignment, and a masked load at an
        # unaligned address is split into 2-byte loads. So each row is walked from the
        # aligned address VEC-mis elements before it: only the first and last chunk need a
        # mask; the chunks between load and store whole 16-byte vectors.
        row_off = tl.minimum(rows, n_rows - 1)[:, None] * X_row_stride
        aligned = (row_off // VEC) * VEC  # the compiler sees this is a multiple of VEC
        mis = row_off - aligned
        x_base = X_ptr + aligned
        y_base = Y_ptr + (rows[:, None] * Y_row_stride // VEC) * VEC
        n_span = n_cols + tl.max(tl.max(mis, axis=1), axis=0)  # no all-masked extra step
        m = tl.full([ROWS], -float("inf"), tl.float32)
        s = tl.zeros([ROWS], tl.float32)
        for start in tl.range(0, n_span, BLOCK_COLS):
            c = start + cols
            if (start > 0) & (start + BLOCK_COLS <= n_cols):
                x = tl.load(x_base + c).to(tl.float32)
            else:
                edge = (c >= mis) & (c < n_cols + mis)
                x = tl.load(x_base + c, mask=edge, other=-float("inf")).to(tl.float32)
            m_new = tl.maximum(m, tl.max(x, axis=1))
            # While every value seen is -inf, shift by 0 so -inf - -inf never makes a NaN.
            shift = tl.where(m_new == -float("inf"), 0.0, m_new)
            s = s * tl.exp(m - shift) + tl.sum(tl.exp(x - shift[:, None]), axis=1)
            m = m_new
        inv = 1.0 / s
        for start in tl.range(0, n_span, BLOCK_COLS):
            c = start + cols
            if (start > 0) & (start + BLOCK_COLS <= n_cols) & (ROWS == 1):
                x = tl.load(x_base + c).to(tl.float32)
                y = tl.exp(x - m[:, None]) * inv[:, None]
                tl.store(y_base + c, y.to(Y_ptr.dtype.element_ty))
            else:
                edge = (c >= mis) & (c < n_cols + mis)
                x = tl.load(x_base + c, mask=edge, other=-float("inf")).to(tl.float32)
                y = tl.exp(x - m[:, None]) * inv[:, None]
                tl.store(y_base + c, y.to(Y_ptr.dtype.element_ty), mask=row_mask & edge)


@triton.jit
def _split_stats_kernel(
    X_ptr,
    M_ptr,
    S_ptr,
    X_row_stride,
    n_cols,
    n_chunks,
    CHUNK: tl.constexpr,
    BLOCK_COLS: tl.constexpr,
):
    # Phase 1: one program per (row, chunk), the chunks of a row adjacent (one flat grid axis,
    # so the row count is not capped at 65535 as grid axis 1 would be).
    pid = tl.program_id(0).to(tl.int64)
    row = pid // n_chunks
    chunk = pid % n_chunks
    x_row = X_ptr + row * X_row_stride
    cols = tl.arange(0, BLOCK_COLS)
    m = -float("inf")
    s = 0.0
    for off in tl.range(0, CHUNK, BLOCK_COLS):
        c = chunk * CHUNK + off + cols
        x = tl.load(x_row + c, mask=c < n_cols, other=-float("inf")).to(tl.float32)
        m_new = tl.maximum(m, tl.max(x, axis=0))
        # While every value seen is -inf, shift by 0 so -inf - -inf never makes a NaN.
        shift = tl.where(m_new == -float("inf"), 0.0, m_new)
        s = s * tl.exp(m - shift) + tl.sum(tl.exp(x - shift), axis=0)
        m = m_new
    tl.store(M_ptr + pid, m)
    tl.store(S_ptr + pid, s)


@triton.jit
def _split_normalize_kernel(
    X_ptr,
    Y_ptr,
    M_ptr,
    S_ptr,
    X_row_stride,
    Y_row_stride,
    n_cols,
    n_chunks,
    CHUNK: tl.constexpr,
    BLOCK_COLS: tl.constexpr,
    CHUNKS_POW2: tl.constexpr,
):
    pid = tl.program_id(0).to(tl.int64)
    row = pid // n_chunks
    chunk = pid % n_chunks
    # Phase 2: every program of a row merges the same partials in the same order, so all its
    # chunks agree on (m, s) bit for bit; cheaper than a third launch for a few hundred floats.
    k = tl.arange(0, CHUNKS_POW2)
    k_mask = k < n_chunks
    pm = tl.load(M_ptr + row * n_chunks + k, mask=k_mask, other=-float("inf"))
    ps = tl.load(S_ptr + row * n_chunks + k, mask=k_mask, other=0.0)
    m = tl.max(pm, axis=0)
    # An all -inf row keeps s = 0 here (no NaN yet); exp(-inf - -inf) below makes it NaN as torch.
    shift = tl.where(m == -float("inf"), 0.0, m)
    inv = 1.0 / tl.sum(ps * tl.exp(pm - shift), axis=0)
    # Phase 3: re-read the chunk and normalize.
    x_row = X_ptr + row * X_row_stride
    y_row = Y_ptr + row * Y_row_stride
    cols = tl.arange(0, BLOCK_COLS)
    for off in tl.range(0, CHUNK, BLOCK_COLS):
        c = chunk * CHUNK + off + cols
        c_mask = c < n_cols
        x = tl.load(x_row + c, mask=c_mask, other=-float("inf")).to(tl.float32)
        y = tl.exp(x - m) * inv
        tl.store(y_row + c, y.to(Y_ptr.dtype.element_ty), mask=c_mask)


def kernel_fn(x: torch.Tensor) -> torch.Tensor:
    key = (x.shape, x.stride(), x.dtype, x.device, x.data_ptr() % 16, *CONFIG.values())
    run = _PLANS.get(key)
    if run is None:
        run = remember(_PLANS, key, _plan(x))
    return run(x)


def _plan(x: torch.Tensor):
    """run(x) for every call with x's signature (see _PLANS)."""
    shape, dtype, device, n_cols = x.shape, x.dtype, x.device, x.shape[-1]
    if x.numel() == 0:
        return lambda x: torch.empty(shape, dtype=dtype, device=device)
    x2 = x.reshape(-1, n_cols)
    # Rows reachable through x's own pointer: pass x as it is; else every call copies.
    as_is = x2.data_ptr() == x.data_ptr() and x2.stride(-1) == 1
    x2 = x2 if as_is else x2.contiguous()
    n_rows = x2.shape[0]
    y = torch.empty((n_rows, n_cols), dtype=dtype, device=device)
    contiguous = x.is_contiguous()

    def take(x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """x as the kernels read it, and a fresh output."""
        if contiguous:
            return x, torch.empty_like(x)
        y = torch.empty(shape, dtype=dtype, device=device)
        return (x if as_is else x.reshape(-1, n_cols).contiguous()), y

    if CONFIG["VARIANT"] == "split" and n_cols > CONFIG["SPLIT_CHUNK"]:
        return _split(x2, y, take)
    padded = _pow2(n_cols)
    # A "split" row that fits one chunk fits in registers too (SPLIT_CHUNK <= 16384): "single".
    single = CONFIG["VARIANT"] != "online" and (
        CONFIG["VARIANT"] == "split" or padded <= CONFIG["MAX_SINGLE_COLS"]
    )
    block_cols = padded if single else min(CONFIG["BLOCK_SIZE"], padded)
    rows = max(1, CONFIG["BLOCK_SIZE"] // block_cols)
    rows = min(rows, CONFIG["ROWS_PER_PROGRAM"], _pow2(n_rows))
    num_warps = max(1, min(CONFIG["num_warps"], rows * block_cols // 256))
    launch = launcher(
        _softmax_kernel,
        (_cdiv(n_rows, rows),),
        # X_row_stride, Y_row_stride, n_rows, n_cols, BLOCK_COLS, ROWS, SINGLE, VEC
        (x2.stride(0), y.stride(0), n_rows, n_cols, block_cols, rows, single, _vec(x2, y)),
        {"num_warps": num_warps},
    )

    def run(x: torch.Tensor) -> torch.Tensor:
        x, y = take(x)
        launch(x, y)
        return y

    return run


def _vec(x2: torch.Tensor, y: torch.Tensor) -> int:
    """Elements per 16 bytes when both rows start at the same offset from 16-byte-aligned
    bases (the kernel then walks rows from aligned addresses), else 1 (no alignment assumed).
    Fresh allocations are aligned, and x's alignment is part of the plan's key."""
    vec = 16 // x2.element_size()
    aligned = x2.data_ptr() % 16 == 0 and y.data_ptr() % 16 == 0
    return vec if aligned and x2.stride(0) == y.stride(0) and vec <= 8 else 1


def _split(x2: torch.Tensor, y: torch.Tensor, take):
    n_rows, n_cols = x2.shape
    device = x2.device
    chunk = CONFIG["SPLIT_CHUNK"]
    n_chunks = _cdiv(n_cols, chunk)
    block_cols = min(CONFIG["BLOCK_SIZE"], chunk)
    num_warps = max(1, min(CONFIG["num_warps"], block_cols // 256))
    grid = (n_rows * n_chunks,)
    stats = launcher(
        _split_stats_kernel,
        grid,
        # X_row_stride, n_cols, n_chunks, CHUNK, BLOCK_COLS
        (x2.stride(0), n_cols, n_chunks, chunk, block_cols),
        {"num_warps": num_warps},
    )
    normalize = launcher(
        _split_normalize_kernel,
        grid,
        # X_row_stride, Y_row_stride, n_cols, n_chunks, CHUNK, BLOCK_COLS, CHUNKS_POW2
        (x2.stride(0), y.stride(0), n_cols, n_chunks, chunk, block_cols, _pow2(n_chunks)),
        {"num_warps": num_warps},
    )

    def run(x: torch.Tensor) -> torch.Tensor:
        x, y = take(x)
        # Per-(row, chunk) partial max and sum: 8 bytes per chunk, noise next to the row itself.
        part_m = torch.empty((n_rows * n_chunks,), dtype=torch.float32, device=device)
        part_s = torch.empty_like(part_m)
        stats(x, part_m, part_s)
        normalize(x, y, part_m, part_s)
        return y

    return run


def _cdiv(a: int, b: int) -> int:
    """ceil(a / b) on the host. triton.cdiv and triton.next_power_of_2 are constexpr functions:
    called from Python each costs microseconds, several per launch, and a narrow-row kernel
    runs in tens of microseconds (the H200 showed 35-75 us of host time per call)."""
    return -(-a // b)


def _pow2(n: int) -> int:
    """The smallest power of two >= n (0 for 0), as triton.next_power_of_2, in plain Python."""
    return 1 << (n - 1).bit_length() if n > 0 else 0
