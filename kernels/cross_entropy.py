"""Mean token cross-entropy: loss = mean over rows with target != -100 of lse(row) - row[target].

Memory-bound: the logits are read exactly once, in one launch. Each program computes its rows'
log-sum-exp in fp32; "single" holds the whole row in registers while next_pow2(vocab) fits under
MAX_SINGLE_COLS, "online" (and wider rows) walk the row in BLOCK_SIZE-column chunks keeping a
running max and a rescaled running sum, from the 16-byte-aligned address at or before the row
(odd vocabularies still load 16-byte vectors). The target logit is one extra scalar load per row.
Ignored rows skip their logits entirely (masked loads move no bytes). Narrow vocabularies put
several rows in one [ROWS, COLS] tile. The mean is folded into the same launch (_finish_mean):
each program writes its loss sum and row count to a workspace the plan keeps, takes a ticket
from an atomic counter, and the program that draws the last ticket sums every program's slot
in index order and resets the counter. Which program finishes last varies; the order of the
sum does not, so the mean is bitwise reproducible. A second launch for the mean cost about
6 us of host time per call (issue 13's goal is 12 us a call). "split" spreads each row over
several programs (SPLIT_CHUNK columns each) so the read of the logits has enough programs in
flight: they write per-chunk fp32 max and sum of exp(x - max) to the workspace, and a combine
kernel merges a row's partials (log-sum-exp) into its loss and finishes the mean; the logits
are still read once. Vocabularies no wider than SPLIT_CHUNK take the "single" path instead.
"""

import torch
import triton
import triton.language as tl

from autokernel.launch import launcher, remember

KERNEL_TYPE = "cross_entropy"
BACKEND = "triton"
# Tunables read by kernel_fn; the built-in tuner rewrites this dict literal, so keep it a literal.
# BLOCK_SIZE: elements per tile (online chunk width, and the row-group size for narrow rows);
# MAX_SINGLE_COLS: widest padded row the "single" variant keeps in registers (columns);
# SPLIT_CHUNK: columns per program in "split" (walked in tiles of at most BLOCK_SIZE).
CONFIG = {
    "VARIANT": "single",
    "SPLIT_CHUNK": 4096,
    "BLOCK_SIZE": 4096,
    "MAX_SINGLE_COLS": 8192,
    "ROWS_PER_PROGRAM": 8,
    "num_warps": 4,
}
# Allowed values per CONFIG key: every combination must be correct (slow is fine, wrong is not).
SEARCH_SPACE = {
    "VARIANT": ["single", "split", "online"],
    "SPLIT_CHUNK": [1024, 2048, 4096, 8192, 16384],
    "BLOCK_SIZE": [512, 1024, 2048, 4096, 8192],
    "MAX_SINGLE_COLS": [2048, 4096, 8192, 16384],
    "ROWS_PER_PROGRAM": [1, 2, 4, 8, 16],
    "num_warps": [1, 2, 4, 8, 16],
}

# Launch plans by call signature (shape, strides, dtype, device, 16-byte alignment, CONFIG): all
# that kernel_fn derives from them, and Triton's compiled kernel. A repeat call costs a lookup,
# one allocation and one launch (deriving it all per call cost 35 us of host time on the H200).
_PLANS: dict = {}

IGNORE_INDEX = -100  # as reference.IGNORE_INDEX and torch.nn.functional.cross_entropy
MEAN_BLOCK = 1024  # program slots summed per step by the program that finishes the mean
COMBINE_TILE = 2048  # partials merged per program by the split variant's combine kernel


@triton.jit
def _cross_entropy_kernel(
    X_ptr,
    T_ptr,
    P_ptr,
    C_ptr,
    Ticket_ptr,
    Out_ptr,
    X_row_stride,
    n_rows,
    n_cols,
    IGNORE: tl.constexpr,
    BLOCK_COLS: tl.constexpr,
    ROWS: tl.constexpr,
    SINGLE: tl.constexpr,
    VEC: tl.constexpr,
    MEAN_BLOCK: tl.constexpr,
):
    pid = tl.program_id(0).to(tl.int64)
    rows = pid * ROWS + tl.arange(0, ROWS)
    row_mask = rows < n_rows
    target = tl.load(T_ptr + rows, mask=row_mask, other=IGNORE)
    active = row_mask & (target != IGNORE)
    x_row = X_ptr + rows[:, None] * X_row_stride
    cols = tl.arange(0, BLOCK_COLS)[None, :]
    if SINGLE:
        mask = active[:, None] & (cols < n_cols)
        x = tl.load(x_row + cols, mask=mask, other=-float("inf")).to(tl.float32)
        m = tl.max(x, axis=1)
        shift = tl.where(m == -float("inf"), 0.0, m)
        s = tl.sum(tl.exp(x - shift[:, None]), axis=1)
    else:
        # Odd vocabularies (50257) leave most rows off 16-byte alignment, and a masked load at
        # an unaligned address is split into 2-byte loads. So each row is walked from the
        # aligned address mis elements before it: only its first and last chunk are masked,
        # the chunks between load whole 16-byte vectors (when every row of the tile is active).
        row_off = rows[:, None] * X_row_stride
        aligned = (row_off // VEC) * VEC  # the compiler sees this is a multiple of VEC
        mis = row_off - aligned
        x_base = X_ptr + aligned
        dense = tl.min(active.to(tl.int32), axis=0) == 1
        m = tl.full([ROWS], -float("inf"), tl.float32)
        s = tl.zeros([ROWS], tl.float32)
        n_span = n_cols + tl.max(tl.max(mis, axis=1), axis=0)  # no all-masked extra step
        for start in tl.range(0, n_span, BLOCK_COLS):
            c = start + cols
            if dense & (start > 0) & (start + BLOCK_COLS <= n_cols):
                x = tl.load(x_base + c).to(tl.float32)
            else:
                mask = active[:, None] & (c >= mis) & (c < n_cols + mis)
                x = tl.load(x_base + c, mask=mask, other=-float("inf")).to(tl.float32)
            m_new = tl.maximum(m, tl.max(x, axis=1))
            # While every value seen is -inf (ignored rows), shift by 0: no -inf - -inf NaN.
            shift = tl.where(m_new == -float("inf"), 0.0, m_new)
            s = s * tl.exp(m - shift) + tl.sum(tl.exp(x - shift[:, None]), axis=1)
            m = m_new
    # Out-of-range targets (torch raises on them) are never dereferenced.
    in_range = active & (target >= 0) & (target < n_cols)
    x_target = tl.load(X_ptr + rows * X_row_stride + target, mask=in_range, other=0.0)
    # (max - target) first: exact for the confident rows where the two nearly cancel. Ignored
    # rows have s = 0; log(1) keeps their (discarded) value finite.
    loss = (m - x_target.to(tl.float32)) + tl.log(tl.where(active, s, 1.0))
    _finish_mean(P_ptr, C_ptr, Ticket_ptr, Out_ptr, pid, loss, active, MEAN_BLOCK)


@triton.jit
def _finish_mean(P_ptr, C_ptr, Ticket_ptr, Out_ptr, pid, loss, active, MEAN_BLOCK: tl.constexpr):
    """Write this program's loss sum and row count to slot pid; the program that draws the last
    ticket writes the mean over every slot, summed in slot order, and resets the counter for
    the next launch."""
    tl.store(P_ptr + pid, tl.sum(tl.where(active, loss, 0.0), axis=0))
    tl.store(C_ptr + pid, tl.sum(active.to(tl.int32), axis=0))
    # Every thread's stores come before the ticket (bar.sync); the acq_rel atomic at GPU scope
    # publishes them to the program that draws the last ticket, and orders its reads after.
    tl.debug_barrier()
    n_programs = tl.num_programs(0)
    ticket = tl.atomic_add(Ticket_ptr, 1, sem="acq_rel", scope="gpu")
    if ticket == n_programs - 1:
        offs = tl.arange(0, MEAN_BLOCK)
        total = tl.zeros([MEAN_BLOCK], tl.float32)
        count = tl.zeros([MEAN_BLOCK], tl.int32)
        for start in tl.range(0, n_programs, MEAN_BLOCK):
            mask = start + offs < n_programs
            # .cg: read the slots from L2, where the other SMs' stores are, not a stale L1 line.
            total += tl.load(P_ptr + start + offs, mask=mask, other=0.0, cache_modifier=".cg")
            count += tl.load(C_ptr + start + offs, mask=mask, other=0, cache_modifier=".cg")
        # No counted row: 0 / 0 = NaN, as torch returns.
        mean = tl.sum(total, axis=0) / tl.sum(count, axis=0).to(tl.float32)
        tl.store(Out_ptr, mean.to(Out_ptr.dtype.element_ty))
        tl.atomic_xchg(Ticket_ptr, 0, sem="relaxed", scope="gpu")


@triton.jit
def _split_stats_kernel(
    X_ptr,
    T_ptr,
    M_ptr,
    S_ptr,
    X_row_stride,
    n_cols,
    n_chunks,
    IGNORE: tl.constexpr,
    CHUNK: tl.constexpr,
    BLOCK_COLS: tl.constexpr,
):
    # One program per (row, chunk), the chunks of a row adjacent (one flat grid axis, so the row
    # count is not capped at 65535 as grid axis 1 would be).
    pid = tl.program_id(0).to(tl.int64)
    row = pid // n_chunks
    chunk = pid % n_chunks
    # Ignored rows load nothing (all-false masks move no bytes): m = -inf, s = 0.
    active = tl.load(T_ptr + row) != IGNORE
    x_row = X_ptr + row * X_row_stride
    cols = tl.arange(0, BLOCK_COLS)
    m = -float("inf")
    s = 0.0
    for off in tl.range(0, CHUNK, BLOCK_COLS):
        c = chunk * CHUNK + off + cols
        x = tl.load(x_row + c, mask=active & (c < n_cols), other=-float("inf")).to(tl.float32)
        m_new = tl.maximum(m, tl.max(x, axis=0))
        # While every value seen is -inf, shift by 0 so -inf - -inf never makes a NaN.
        shift = tl.where(m_new == -float("inf"), 0.0, m_new)
        s = s * tl.exp(m - shift) + tl.sum(tl.exp(x - shift), axis=0)
        m = m_new
    tl.store(M_ptr + pid, m)
    tl.store(S_ptr + pid, s)


@triton.jit
def _split_combine_kernel(
    X_ptr,
    T_ptr,
    M_ptr,
    S_ptr,
    P_ptr,
    C_ptr,
    Ticket_ptr,
    Out_ptr,
    X_row_stride,
    n_rows,
    n_cols,
    n_chunks,
    IGNORE: tl.constexpr,
    ROWS: tl.constexpr,
    CHUNKS_POW2: tl.constexpr,
    MEAN_BLOCK: tl.constexpr,
):
    pid = tl.program_id(0).to(tl.int64)
    rows = pid * ROWS + tl.arange(0, ROWS)
    row_mask = rows < n_rows
    target = tl.load(T_ptr + rows, mask=row_mask, other=IGNORE)
    active = row_mask & (target != IGNORE)
    # Merge the row's partials: lse = m + log(sum_k s_k * exp(m_k - m)), m = max_k m_k.
    k = tl.arange(0, CHUNKS_POW2)[None, :]
    mask = row_mask[:, None] & (k < n_chunks)
    part = rows[:, None] * n_chunks + k
    pm = tl.load(M_ptr + part, mask=mask, other=-float("inf"))
    ps = tl.load(S_ptr + part, mask=mask, other=0.0)
    m = tl.max(pm, axis=1)
    # Ignored rows have every m_k = -inf: shift by 0 so no -inf - -inf NaN appears.
    shift = tl.where(m == -float("inf"), 0.0, m)
    s = tl.sum(ps * tl.exp(pm - shift[:, None]), axis=1)
    # Out-of-range targets (torch raises on them) are never dereferenced.
    in_range = active & (target >= 0) & (target < n_cols)
    x_target = tl.load(X_ptr + rows * X_row_stride + target, mask=in_range, other=0.0)
    # As in the one-pass kernel: (max - target) first, log(1) for the discarded ignored rows.
    loss = (m - x_target.to(tl.float32)) + tl.log(tl.where(active, s, 1.0))
    _finish_mean(P_ptr, C_ptr, Ticket_ptr, Out_ptr, pid, loss, active, MEAN_BLOCK)


def kernel_fn(logits: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
    key = (
        logits.shape,
        logits.stride(),
        logits.dtype,
        logits.device,
        logits.data_ptr() % 16,
        targets.shape,
        targets.stride(),
        targets.dtype,
        targets.data_ptr() % 16,
        *CONFIG.values(),
    )
    run = _PLANS.get(key)
    if run is None:
        run = remember(_PLANS, key, _plan(logits, targets))
    return run(logits, targets)


def _plan(logits: torch.Tensor, targets: torch.Tensor):
    """run(logits, targets) for every call with their signature (see _PLANS)."""
    n_rows, n_cols = logits.shape
    device = logits.device
    out_dtype = torch.float64 if logits.dtype == torch.float64 else torch.float32
    if n_rows == 0 or n_cols == 0:
        # No row (0 / 0), or no classes (torch raises; nothing is read): the mean is NaN.
        return lambda logits, targets: torch.full((), float("nan"), dtype=out_dtype, device=device)
    copy_logits = logits.stride(-1) != 1
    copy_targets = not targets.is_contiguous()
    if copy_logits:
        logits = logits.contiguous()

    if CONFIG["VARIANT"] == "split" and n_cols > CONFIG["SPLIT_CHUNK"]:
        launch = _split(logits)
    else:
        padded = _pow2(n_cols)
        # A "split" row that fits one chunk fits in registers too (SPLIT_CHUNK <= 16384).
        single = CONFIG["VARIANT"] != "online" and (
            CONFIG["VARIANT"] == "split" or padded <= CONFIG["MAX_SINGLE_COLS"]
        )
        block_cols = padded if single else min(CONFIG["BLOCK_SIZE"], padded)
        rows = max(1, CONFIG["BLOCK_SIZE"] // block_cols)
        rows = min(rows, CONFIG["ROWS_PER_PROGRAM"], _pow2(n_rows))
        num_warps = max(1, min(CONFIG["num_warps"], rows * block_cols // 256))
        vec = 16 // logits.element_size() if logits.data_ptr() % 16 == 0 else 1
        n_programs = _cdiv(n_rows, rows)
        slots = _slots(n_programs, device)
        rows_launch = launcher(
            _cross_entropy_kernel,
            (n_programs,),
            # X_row_stride, n_rows, n_cols, IGNORE, BLOCK_COLS, ROWS, SINGLE, VEC, MEAN_BLOCK
            (logits.stride(0), n_rows, n_cols, IGNORE_INDEX, block_cols, rows, single, vec,
             min(MEAN_BLOCK, _pow2(n_programs))),
            {"num_warps": num_warps},
        )  # fmt: skip

        def launch(logits: torch.Tensor, targets: torch.Tensor, out: torch.Tensor) -> None:
            rows_launch(logits, targets, *slots, out)

    def run(logits: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
        out = torch.empty((), dtype=out_dtype, device=device)
        if copy_logits:
            logits = logits.contiguous()
        if copy_targets:
            targets = targets.contiguous()
        launch(logits, targets, out)
        return out

    return run


def _slots(n_programs: int, device: torch.device) -> tuple:
    """The mean's workspace for one plan: (loss sum per program, row count per program, ticket
    counter; zero between launches: the last program resets it). Its size depends only on the
    call signature. Calls on one stream run in order, so one workspace serves them all; two
    streams calling one plan at the same moment would share it."""
    return (
        torch.empty((n_programs,), dtype=torch.float32, device=device),
        torch.empty((n_programs,), dtype=torch.int32, device=device),
        torch.zeros((1,), dtype=torch.int32, device=device),
    )


def _split(logits: torch.Tensor):
    """launch(logits, targets, out) for the "split" variant."""
    n_rows, n_cols = logits.shape
    device = logits.device
    chunk = CONFIG["SPLIT_CHUNK"]
    n_chunks = _cdiv(n_cols, chunk)
    block_cols = min(CONFIG["BLOCK_SIZE"], chunk)
    stats = launcher(
        _split_stats_kernel,
        (n_rows * n_chunks,),
        # X_row_stride, n_cols, n_chunks, IGNORE, CHUNK, BLOCK_COLS
        (logits.stride(0), n_cols, n_chunks, IGNORE_INDEX, chunk, block_cols),
        {"num_warps": max(1, min(CONFIG["num_warps"], block_cols // 256))},
    )
    chunks_pow2 = _pow2(n_chunks)
    rows = max(1, min(COMBINE_TILE // chunks_pow2, _pow2(n_rows)))
    n_programs = _cdiv(n_rows, rows)
    combine = launcher(
        _split_combine_kernel,
        (n_programs,),
        # X_row_stride, n_rows, n_cols, n_chunks, IGNORE, ROWS, CHUNKS_POW2, MEAN_BLOCK
        (logits.stride(0), n_rows, n_cols, n_chunks, IGNORE_INDEX, rows, chunks_pow2,
         min(MEAN_BLOCK, _pow2(n_programs))),
        {"num_warps": max(1, min(4, rows * chunks_pow2 // 256))},
    )  # fmt: skip
    slots = _slots(n_programs, device)
    # Per-(row, chunk) partial max and sum: 8 bytes per chunk, noise next to the logits.
    part_m = torch.empty((n_rows * n_chunks,), dtype=torch.float32, device=device)
    part_s = torch.empty_like(part_m)

    def launch(logits: torch.Tensor, targets: torch.Tensor, out: torch.Tensor) -> None:
        stats(logits, targets, part_m, part_s)
        combine(logits, targets, part_m, part_s, *slots, out)

    return launch


def _cdiv(a: int, b: int) -> int:
    """ceil(a / b) on the host. triton.cdiv and triton.next_power_of_2 are constexpr functions:
    called from Python each costs microseconds, several per launch, and a narrow-row kernel
    runs in tens of microseconds (the H200 showed 35-75 us of host time per call)."""
    return -(-a // b)


def _pow2(n: int) -> int:
    """The smallest power of two >= n (0 for 0), as triton.next_power_of_2, in plain Python."""
    return 1 << (n - 1).bit_length() if n > 0 else 0
