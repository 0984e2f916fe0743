"""Sum over the last dim with an fp32 accumulator; result in the input dtype, shape x.shape[:-1].

Memory-bound: every byte of x is read once. A row wider than CHUNK gets its own program, which
walks it in CHUNK-column steps from the 16-byte-aligned address at or before the row (odd widths
still load 16-byte vectors), adding into an fp32 register tile, reduced across lanes once at the
end in fp64, so a cancelling row keeps its digits whatever order the reduction takes. Each lane
adds only n_cols / CHUNK values in fp32, so it needs no compensation: Kahan summation per lane
cost 5-25 % on the H200 (benchmarks/results/h200-sweep-2026-12-03-4031f9c.json). Narrow rows
put several rows in one tile (at most ROWS_PER_PROGRAM, about BLOCK_SIZE elements per tile).
VARIANT "rows" gives each row group one program; "split" additionally cuts long rows into column
ranges when there are too few row groups to fill the GPU (e.g. 16 rows of 131072): each (rows,
range) program writes an fp32 partial sum, and the same kernel then sums the partials in a fixed
order, so results stay bitwise reproducible (no atomics). With enough rows "split" launches
exactly what "rows" does.
"""

import torch
import triton
import triton.language as tl

from autokernel.launch import launcher, remember

KERNEL_TYPE = "reduce"
BACKEND = "triton"
# Tunables read by kernel_fn; the built-in tuner rewrites this dict literal, so keep it a literal.
# BLOCK_SIZE: elements per tile for narrow rows (row groups); CHUNK: column width of one step
# along a wide row (on the H200 2048 columns per 4-warp program and step).
CONFIG = {
    "VARIANT": "split",
    "BLOCK_SIZE": 4096,
    "CHUNK": 2048,
    "ROWS_PER_PROGRAM": 32,
    "num_warps": 4,
}
# Allowed values per CONFIG key: every combination must be correct (slow is fine, wrong is not).
SEARCH_SPACE = {
    "VARIANT": ["rows", "split"],
    "BLOCK_SIZE": [512, 1024, 2048, 4096, 8192, 16384],
    "CHUNK": [256, 512, 1024, 2048, 4096, 8192],
    "ROWS_PER_PROGRAM": [1, 2, 4, 8, 16, 32],
    "num_warps": [1, 2, 4, 8, 16],
}

# Launch plans by call signature (shape, strides, dtype, device, 16-byte alignment, CONFIG): all
# that kernel_fn derives from them, and Triton's compiled kernel. A repeat call costs a lookup,
# one allocation and the launch (deriving it all per call cost 35 us of host time on the H200).
_PLANS: dict = {}

PROGRAMS_PER_SM = 4  # "split" cuts rows until about this many programs per SM are running
CPU_PROGRAMS = 16  # the interpreter has no SMs; a small target still exercises the split path


@triton.jit
def _reduce_kernel(
    X_ptr,
    Y_ptr,
    X_row_stride,
    Y_row_stride,
    n_rows,
    n_cols,
    cols_per_split,
    BLOCK_COLS: tl.constexpr,
    ROWS: tl.constexpr,
    VEC: tl.constexpr,
    SPLIT: tl.constexpr,
):
    pid = tl.program_id(0).to(tl.int64)
    split = tl.program_id(1).to(tl.int64)
    rows = pid * ROWS + tl.arange(0, ROWS)
    row_mask = rows < n_rows
    cols = tl.arange(0, BLOCK_COLS)[None, :]
    if SPLIT:
        col_begin = tl.multiple_of(split * cols_per_split, VEC)  # kernel_fn checks it is
        col_end = tl.minimum(col_begin + cols_per_split, n_cols)
    else:
        # Whole rows: bounds the compiler can see through. Through the minimum above, the
        # narrow-row mask lost n_cols's divisibility and every load became 2-byte (sm_90 PTX).
        col_begin = 0
        col_end = n_cols
    acc = tl.zeros([ROWS, BLOCK_COLS], tl.float32)
    if VEC > 1:
        # One row per program (kernel_fn passes VEC > 1 only then). Odd widths (50257) leave
        # most rows off 16-byte alignment, and a masked load at an unaligned address is split
        # into 2-byte loads. So the row is walked from the aligned address mis elements before
        # it (column c holds x[c - mis]): only the first and last chunk of a range are masked,
        # the chunks between load whole 16-byte vectors.
        row_off = rows[:, None] * X_row_stride
        aligned = (row_off // VEC) * VEC  # the compiler sees this is a multiple of VEC
        mis = row_off - aligned
        x_base = X_ptr + aligned
        span_end = col_end + tl.max(tl.max(mis, axis=1), axis=0)
        for start in tl.range(col_begin, span_end, BLOCK_COLS):
            c = start + cols
            if (start > col_begin) & (start + BLOCK_COLS <= col_end):
                x = tl.load(x_base + c).to(tl.float32)
            else:
                edge = (c >= col_begin + mis) & (c < col_end + mis)
                x = tl.load(x_base + c, mask=edge, other=0.0).to(tl.float32)
            acc += x
    else:
        x_row = X_ptr + rows[:, None] * X_row_stride
        for start in tl.range(col_begin, col_end, BLOCK_COLS):
            mask = row_mask[:, None] & (start + cols < col_end)
            x = tl.load(x_row + start + cols, mask=mask, other=0.0).to(tl.float32)
            acc += x
    # One fp64 tree across the lanes: its order differs between the GPU and the interpreter,
    # and in fp32 a +-1000 alternating row loses the O(sqrt(n)) total to that order.
    total = tl.sum(acc.to(tl.float64), axis=1).to(tl.float32)
    tl.store(Y_ptr + rows * Y_row_stride + split, total.to(Y_ptr.dtype.element_ty), mask=row_mask)


def _launch_rows(x2: torch.Tensor, y_row_stride: int, splits: int, cols_per_split: int):
    """launch(x, y): sum each row of x (shaped as x2), or each of its `splits` column ranges,
    into y."""
    n_rows, n_cols = x2.shape
    block_cols = _block_cols(min(n_cols, cols_per_split))
    # Rows are grouped only when each fits one step; a row walked in steps gets its own program.
    span = min(n_cols, cols_per_split)
    rows = max(1, CONFIG["BLOCK_SIZE"] // block_cols) if block_cols >= span else 1
    rows = min(rows, CONFIG["ROWS_PER_PROGRAM"], _pow2(n_rows))
    # Threads get at least 8 elements per step, 16 when walking a wide row (measured on the H200:
    # more warps then only add reduction overhead, narrow row groups want the warps).
    per_thread = 16 if block_cols < span else 8
    num_warps = max(1, min(CONFIG["num_warps"], rows * block_cols // (32 * per_thread)))
    vec = _vec(x2, splits, cols_per_split) if rows == 1 else 1
    return launcher(
        _reduce_kernel,
        (_cdiv(n_rows, rows), splits),
        # X_row_stride, Y_row_stride, n_rows, n_cols, cols_per_split, BLOCK_COLS, ROWS, VEC, SPLIT
        (
            x2.stride(0),
            y_row_stride,
            n_rows,
            n_cols,
            cols_per_split,
            block_cols,
            rows,
            vec,
            splits > 1,
        ),
        {"num_warps": num_warps},
    )


def _block_cols(n_cols: int) -> int:
    """A row that fits one CHUNK is one step (narrow rows then group by BLOCK_SIZE); a wider
    row walks in CHUNK steps."""
    return min(CONFIG["CHUNK"], CONFIG["BLOCK_SIZE"], _pow2(n_cols))


def _vec(x2: torch.Tensor, splits: int, cols_per_split: int) -> int:
    """Elements per 16 bytes when x2 starts 16-byte aligned and every column range starts at a
    multiple of it (the kernel then walks rows from aligned addresses), else 1."""
    vec = 16 // x2.element_size()
    ok = x2.data_ptr() % 16 == 0 and (splits == 1 or cols_per_split % vec == 0)
    return vec if ok else 1


def kernel_fn(x: torch.Tensor) -> torch.Tensor:
    key = (x.shape, x.stride(), x.dtype, x.device, x.data_ptr() % 16, *CONFIG.values())
    run = _PLANS.get(key)
    if run is None:
        run = remember(_PLANS, key, _plan(x))
    return run(x)


def _plan(x: torch.Tensor):
    """run(x) for every call with x's signature (see _PLANS)."""
    out_shape, dtype, device, n_cols = x.shape[:-1], x.dtype, x.device, x.shape[-1]
    if n_cols == 0:
        return lambda x: torch.zeros(out_shape, dtype=dtype, device=device)
    if x.numel() == 0:
        return lambda x: torch.empty(out_shape, dtype=dtype, device=device)
    x2 = x.reshape(-1, n_cols)
    # Rows reachable through x's own pointer: pass x as it is; else every call copies.
    as_is = x2.data_ptr() == x.data_ptr() and x2.stride(-1) == 1
    x2 = x2 if as_is else x2.contiguous()
    n_rows = x2.shape[0]

    block_cols = _block_cols(n_cols)
    rows = max(1, CONFIG["BLOCK_SIZE"] // block_cols) if block_cols >= n_cols else 1
    rows = min(rows, CONFIG["ROWS_PER_PROGRAM"])
    row_programs = _cdiv(n_rows, rows)
    splits = 1
    if CONFIG["VARIANT"] == "split":
        if x.is_cuda:
            sms = torch.cuda.get_device_properties(x.device).multi_processor_count
            target = PROGRAMS_PER_SM * sms
        else:
            target = CPU_PROGRAMS
        if row_programs < target:
            splits = min(_cdiv(n_cols, block_cols), _cdiv(target, row_programs))

    def take(x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """x as the kernels read it, and a fresh output."""
        y = torch.empty(out_shape, dtype=dtype, device=device)
        return (x if as_is else x.reshape(-1, n_cols).contiguous()), y

    if splits == 1:
        launch = _launch_rows(x2, 1, 1, n_cols)

        def run(x: torch.Tensor) -> torch.Tensor:
            x, y = take(x)
            launch(x, y)
            return y

        return run
    # Whole chunks per range, then drop ranges that would be empty.
    cols_per_split = _cdiv(_cdiv(n_cols, block_cols), splits) * block_cols
    splits = _cdiv(n_cols, cols_per_split)
    partial = torch.empty((n_rows, splits), dtype=torch.float32, device=device)
    ranges = _launch_rows(x2, splits, splits, cols_per_split)
    totals = _launch_rows(partial, 1, 1, splits)

    def run_split(x: torch.Tensor) -> torch.Tensor:
        x, y = take(x)
        partial = torch.empty((n_rows, splits), dtype=torch.float32, device=device)
        ranges(x, partial)
        totals(partial, y)
        return y

    return run_split


def _cdiv(a: int, b: int) -> int:
    """ceil(a / b) on the host. triton.cdiv and triton.next_power_of_2 are constexpr functions:
    called from Python each costs microseconds, several per launch, and a narrow-row kernel
    runs in tens of microseconds (the H200 showed 35-75 us of host time per call)."""
    return -(-a // b)


def _pow2(n: int) -> int:
    """The smallest power of two >= n (0 for 0), as triton.next_power_of_2, in plain Python."""
    return 1 << (n - 1).bit_length() if n > 0 else 0
