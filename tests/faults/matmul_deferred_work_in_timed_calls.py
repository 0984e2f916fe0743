# expect: REJECTED benchmark
"""Planted cheat: defer the work of the fresh-value timed calls to the last of them, and
replay a kept product while the values stay the same.

The timing's defence against a cached output is the fresh-value calls (new values before each,
their median is the figure when slower). Here each fresh call saves copies of its inputs and
returns an unwritten output; the last one computes all the saved products into the outputs
already returned, so every output is right by the time the judge reads it, and the median of the
fresh calls is a copy's time. The same-value calls (and the judge's batch after its first call)
return a copy of a product kept from the first call on those values. Every output the judge
fetched was right. Caught: a sampled timed output is copied when its call returns, and two of
the fresh calls (chosen at random) are always sampled: REJECTED in benchmark.
"""

import torch
import triton
import triton.language as tl

KERNEL_TYPE = "matmul"
STATE: dict = {"key": None, "run": 0, "kept": None, "pending": []}
FRESH = range(53, 58)  # CPU: checked call 1, warm-up 2, 50 samples, then 5 fresh-value calls
BATCH_FIRST = 58  # the judge's batch: new values once, then 20 calls on them


@triton.jit
def _mm(A, B, C, M, N, K, sam, sak, sbk, sbn, scm, scn,
        BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr):  # fmt: skip
    rm = tl.program_id(0) * BM + tl.arange(0, BM)
    rn = tl.program_id(1) * BN + tl.arange(0, BN)
    rk = tl.arange(0, BK)
    acc = tl.zeros((BM, BN), dtype=tl.float32)
    for k0 in range(0, K, BK):
        a = tl.load(A + rm[:, None] * sam + (k0 + rk)[None, :] * sak,
                    mask=(rm[:, None] < M) & ((k0 + rk)[None, :] < K), other=0.0)  # fmt: skip
        b = tl.load(B + (k0 + rk)[:, None] * sbk + rn[None, :] * sbn,
                    mask=((k0 + rk)[:, None] < K) & (rn[None, :] < N), other=0.0)  # fmt: skip
        acc += tl.dot(a.to(tl.float32), b.to(tl.float32), input_precision="ieee")
    mask = (rm[:, None] < M) & (rn[None, :] < N)
    tl.store(C + rm[:, None] * scm + rn[None, :] * scn, acc.to(C.dtype.element_ty), mask=mask)


def _product(A: torch.Tensor, B: torch.Tensor, C: torch.Tensor) -> torch.Tensor:
    M, K = A.shape
    N = B.shape[1]
    grid = (triton.cdiv(M, 64), triton.cdiv(N, 64))
    _mm[grid](A, B, C, M, N, K, A.stride(0), A.stride(1), B.stride(0), B.stride(1),
              C.stride(0), C.stride(1), BM=64, BN=64, BK=64)  # fmt: skip
    return C


def kernel_fn(A: torch.Tensor, B: torch.Tensor) -> torch.Tensor:
    key = (tuple(A.shape), tuple(B.shape), A.dtype, A.data_ptr(), B.data_ptr())
    STATE["run"] = STATE["run"] + 1 if key == STATE["key"] else 1
    STATE["key"] = key
    run = STATE["run"]
    C = torch.empty((A.shape[0], B.shape[1]), dtype=A.dtype, device=A.device)
    if run in FRESH:  # CHEAT: the work of this call is done by the last fresh call
        STATE["pending"].append((A.clone(), B.clone(), C))
        if run == FRESH[-1]:
            for a, b, c in STATE["pending"]:
                _product(a, b, c)
            STATE["pending"] = []
        return C
    if run == 1 or (run >= BATCH_FIRST and (run - BATCH_FIRST) % 20 == 0):
        STATE["kept"] = _product(A, B, C)
        return C
    return STATE["kept"].clone()  # CHEAT: the same values again: a kept product
