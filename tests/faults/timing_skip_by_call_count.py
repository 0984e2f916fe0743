# expect: REJECTED benchmark
"""Planted cheat: tell the timed calls from the checked ones by counting, and skip the work in
the timed ones; no clock, thread, torch op or refused name.

At a benchmark size the judge's checked call comes first; then the worker's timing makes a
fixed number of calls on the very same buffers (a warm-up, 50 samples and 5 fresh-value calls
on the CPU, for a kernel this fast), and only then the judge's own batch, whose wall time it
takes and one output of which it checks. Calls 4 to 57 of a run of calls on the same buffers
multiply over the first 32 of K only (half the work, a wrong product); every other call is
honest. The outputs of the timed calls were never looked at, and the batch's honest wall time
was within the CPU's limit of 3x the claim plus 2 ms (on a GPU 2x plus 30 us and the flush):
a PASS. Under the interpreter a launch costs most of a small kernel's time, so here the
figure gained little; on a GPU the skipped work is the time.

Caught: the worker keeps outputs of timed calls chosen at random (it cannot be told which)
and the judge checks them against the inputs they were computed from: REJECTED in benchmark.
"""

import torch
import triton
import triton.language as tl

KERNEL_TYPE = "matmul"
STATE = {"key": None, "run": 0}
SKIP = range(4, 58)  # the timed calls, counted from the judge's checked call


@triton.jit
def _mm(A, B, C, M, N, K, sam, sak, sbk, sbn, scm, scn,
        BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr):  # fmt: skip
    pm = tl.program_id(0)
    pn = tl.program_id(1)
    rm = pm * BM + tl.arange(0, BM)
    rn = pn * BN + tl.arange(0, BN)
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


def kernel_fn(A: torch.Tensor, B: torch.Tensor) -> torch.Tensor:
    M, K = A.shape
    N = B.shape[1]
    key = (tuple(A.shape), tuple(B.shape), A.dtype, A.data_ptr(), B.data_ptr())
    STATE["run"] = STATE["run"] + 1 if key == STATE["key"] else 1
    STATE["key"] = key
    C = torch.empty((M, N), dtype=A.dtype, device=A.device)
    bm, bn, bk = 64, 64, 32
    k_done = min(K, bk) if STATE["run"] in SKIP else K  # CHEAT: a timed call: half the work
    grid = (triton.cdiv(M, bm), triton.cdiv(N, bn))
    _mm[grid](A, B, C, M, N, k_done, A.stride(0), A.stride(1), B.stride(0), B.stride(1),
              C.stride(0), C.stride(1), BM=bm, BN=bn, BK=bk)  # fmt: skip
    return C
