"""DRAFT, measured on the H200 at 4031f9c and lost (h200-sweep-2026-12-03-4031f9c-softmax-l2.json):
best 362.7 us with PROGRAMS_PER_SM 0 (one program per row, as shipped) against 356.2 us for the
shipped kernel; 1-4 programs per SM ran 388.9 us and slower. Two-pass online softmax for wide
rows meant to keep the second read in L2.

The shipped "online" variant runs one program per row: about 800 rows of 100 KB are in flight at
4096x50257, more than the 50 MB L2, so the second read comes from DRAM. Here a persistent grid
of PROGRAMS_PER_SM x SMs programs walks rows in turn, so rows in flight = programs (e.g. 264 rows,
26 MB), and EVICT adds hints: the first pass loads with evict_last (keep the row for its second
read), the second with evict_first, and the stores stream with evict_first. The earlier
persistent-grid test (f624778) predates the aligned walk, when every load was 2-byte.
"""

import torch
import triton
import triton.language as tl

KERNEL_TYPE = "softmax"
BACKEND = "triton"
CONFIG = {"BLOCK_SIZE": 8192, "PROGRAMS_PER_SM": 2, "EVICT": 1, "num_warps": 16}
SEARCH_SPACE = {
    "BLOCK_SIZE": [2048, 4096, 8192],
    "PROGRAMS_PER_SM": [0, 1, 2, 3, 4],
    "EVICT": [0, 1],
    "num_warps": [8, 16, 32],
}
CPU_PROGRAMS = 3


@triton.jit
def _online_persistent_kernel(
    X_ptr,
    Y_ptr,
    row_stride,
    n_rows,
    n_cols,
    n_programs,
    BLOCK: tl.constexpr,
    VEC: tl.constexpr,
    EVICT: tl.constexpr,
):
    pid = tl.program_id(0).to(tl.int64)
    cols = tl.arange(0, BLOCK)
    for row in tl.range(pid, n_rows, n_programs):
        row_off = row * row_stride
        aligned = (row_off // VEC) * VEC
        mis = row_off - aligned
        x_base = X_ptr + aligned
        y_base = Y_ptr + aligned
        n_span = n_cols + mis
        m = -float("inf")
        s = 0.0
        for start in tl.range(0, n_span, BLOCK):
            c = start + cols
            if (start > 0) & (start + BLOCK <= n_cols):
                if EVICT:
                    x = tl.load(x_base + c, eviction_policy="evict_last").to(tl.float32)
                else:
                    x = tl.load(x_base + c).to(tl.float32)
            else:
                edge = (c >= mis) & (c < n_cols + mis)
                x = tl.load(x_base + c, mask=edge, other=-float("inf")).to(tl.float32)
            m_new = tl.maximum(m, tl.max(x, axis=0))
            shift = tl.where(m_new == -float("inf"), 0.0, m_new)
            s = s * tl.exp(m - shift) + tl.sum(tl.exp(x - shift), axis=0)
            m = m_new
        inv = 1.0 / s
        for start in tl.range(0, n_span, BLOCK):
            c = start + cols
            if (start > 0) & (start + BLOCK <= n_cols):
                if EVICT:
                    x = tl.load(x_base + c, eviction_policy="evict_first").to(tl.float32)
                    y = tl.exp(x - m) * inv
                    tl.store(
                        y_base + c, y.to(Y_ptr.dtype.element_ty), eviction_policy="evict_first"
                    )
                else:
                    x = tl.load(x_base + c).to(tl.float32)
                    y = tl.exp(x - m) * inv
                    tl.store(y_base + c, y.to(Y_ptr.dtype.element_ty))
            else:
                edge = (c >= mis) & (c < n_cols + mis)
                x = tl.load(x_base + c, mask=edge, other=-float("inf")).to(tl.float32)
                y = tl.exp(x - m) * inv
                tl.store(y_base + c, y.to(Y_ptr.dtype.element_ty), mask=edge)


def kernel_fn(x: torch.Tensor) -> torch.Tensor:
    shape = x.shape
    n_cols = shape[-1]
    x2 = x.reshape(-1, n_cols).contiguous()
    n_rows = x2.shape[0]
    y = torch.empty_like(x2)
    if x2.numel() == 0:
        return y.view(shape)
    block = min(CONFIG["BLOCK_SIZE"], 1 << (n_cols - 1).bit_length())
    if x2.is_cuda:
        sms = torch.cuda.get_device_properties(x2.device).multi_processor_count
        per_sm = CONFIG["PROGRAMS_PER_SM"]
        programs = min(n_rows, per_sm * sms) if per_sm else n_rows
    else:
        programs = min(n_rows, CPU_PROGRAMS)
    vec = 16 // x2.element_size()
    ok = x2.data_ptr() % 16 == 0 and y.data_ptr() % 16 == 0
    _online_persistent_kernel[(programs,)](
        x2,
        y,
        x2.stride(0),
        n_rows,
        n_cols,
        programs,
        BLOCK=block,
        VEC=vec if ok else 1,
        EVICT=CONFIG["EVICT"],
        num_warps=CONFIG["num_warps"],
    )
    return y.view(shape)
