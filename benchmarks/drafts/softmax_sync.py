"""DRAFT, measured and not adopted: a softmax for wide rows that reads x once.

Each row is split over n_chunks adjacent programs. Each program keeps its CHUNK columns in
registers, writes its (max, sum exp) partial, and signals on a per-row counter. It then waits
until every program of its row has arrived, merges the partials in a fixed order and writes its
chunk from registers: no second read of x. Waiting is safe only when all n_chunks programs of a
row can be resident at once and are dispatched in pid order (kernel_fn refuses more chunks than
SMs). It cannot run under the interpreter, which runs programs one after another.

H200, 2026-12-03 (benchmarks/results/h200-sweep-2026-12-03-6407f57.json, run from a copy of
this file): best 524.1 us (1571 GB/s) at 4096x50257 fp16 against 358.0 us for the shipped
two-pass "online" variant in the same process; at 4096x32000 bf16 194.9 us against 195.1 us.
Reading x once did not pay for the wait. Re-run: python benchmarks/config_sweep.py
--jobs benchmarks/drafts/sweep-2026-12-03.json --out sweep.json
"""

import torch
import triton
import triton.language as tl

KERNEL_TYPE = "softmax"
BACKEND = "triton"
CONFIG = {"CHUNK": 4096, "num_warps": 8}
SEARCH_SPACE = {"CHUNK": [2048, 4096, 8192, 16384], "num_warps": [4, 8, 16]}


@triton.jit
def _sync_kernel(
    X_ptr,
    Y_ptr,
    M_ptr,
    S_ptr,
    C_ptr,
    row_stride,
    y_row_stride,
    n_cols,
    n_chunks,
    CHUNK: tl.constexpr,
    CHUNKS_POW2: tl.constexpr,
    VEC: tl.constexpr,
):
    pid = tl.program_id(0).to(tl.int64)
    row = pid // n_chunks
    chunk = pid % n_chunks
    row_off = row * row_stride
    aligned = (row_off // VEC) * VEC
    mis = row_off - aligned
    x_base = X_ptr + aligned
    y_base = Y_ptr + (row * y_row_stride // VEC) * VEC
    c = chunk * CHUNK + tl.arange(0, CHUNK)
    inner = (chunk > 0) & ((chunk + 1) * CHUNK <= n_cols)
    if inner:
        x = tl.load(x_base + c).to(tl.float32)
    else:
        edge = (c >= mis) & (c < n_cols + mis)
        x = tl.load(x_base + c, mask=edge, other=-float("inf")).to(tl.float32)
    m = tl.max(x, axis=0)
    shift = tl.where(m == -float("inf"), 0.0, m)
    s = tl.sum(tl.exp(x - shift), axis=0)
    tl.store(M_ptr + pid, m)
    tl.store(S_ptr + pid, s)
    tl.debug_barrier()
    arrived = tl.atomic_add(C_ptr + row, 1, sem="release") + 1
    while arrived < n_chunks:
        arrived = tl.atomic_add(C_ptr + row, 0, sem="acquire")
    tl.debug_barrier()
    k = tl.arange(0, CHUNKS_POW2)
    km = k < n_chunks
    pm = tl.load(M_ptr + row * n_chunks + k, mask=km, other=-float("inf"), cache_modifier=".cg")
    ps = tl.load(S_ptr + row * n_chunks + k, mask=km, other=0.0, cache_modifier=".cg")
    gm = tl.max(pm, axis=0)
    gshift = tl.where(gm == -float("inf"), 0.0, gm)
    inv = 1.0 / tl.sum(ps * tl.exp(pm - gshift), axis=0)
    y = tl.exp(x - gm) * inv
    if inner:
        tl.store(y_base + c, y.to(Y_ptr.dtype.element_ty))
    else:
        edge = (c >= mis) & (c < n_cols + mis)
        tl.store(y_base + c, y.to(Y_ptr.dtype.element_ty), mask=edge)


def kernel_fn(x: torch.Tensor) -> torch.Tensor:
    if not x.is_cuda:
        raise RuntimeError("softmax_sync needs a GPU: the interpreter runs programs in sequence")
    shape = x.shape
    n_cols = shape[-1]
    x2 = x.reshape(-1, n_cols)
    if x2.stride(-1) != 1:
        x2 = x2.contiguous()
    n_rows = x2.shape[0]
    y = torch.empty((n_rows, n_cols), dtype=x.dtype, device=x.device)
    chunk = CONFIG["CHUNK"]
    n_chunks = triton.cdiv(n_cols + 7, chunk)  # + up to VEC-1 leading columns of the walk
    sms = torch.cuda.get_device_properties(x.device).multi_processor_count
    if n_chunks > sms:
        raise RuntimeError(f"{n_chunks} chunks per row cannot all be resident on {sms} SMs")
    vec = 16 // x2.element_size()
    ok = x2.data_ptr() % 16 == 0 and y.data_ptr() % 16 == 0 and x2.stride(0) == y.stride(0)
    part_m = torch.empty((n_rows * n_chunks,), dtype=torch.float32, device=x.device)
    part_s = torch.empty_like(part_m)
    counters = torch.zeros((n_rows,), dtype=torch.int32, device=x.device)
    _sync_kernel[(n_rows * n_chunks,)](
        x2,
        y,
        part_m,
        part_s,
        counters,
        x2.stride(0),
        y.stride(0),
        n_cols,
        n_chunks,
        CHUNK=chunk,
        CHUNKS_POW2=triton.next_power_of_2(n_chunks),
        VEC=vec if ok else 1,
        num_warps=CONFIG["num_warps"],
    )
    return y.view(shape)
