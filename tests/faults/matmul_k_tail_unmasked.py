# expect: CRASH odd_sizes gpu=FAIL
"""Planted fault: the K loop's loads are masked on M and N but not on K.

BLOCK_K is min(32, next_pow2(K)), so when K is a multiple of it the mask is never needed, and
every sweep and adversarial size has such a K (16, 32, 64, 96, 128). The last K block of any
other K reads past the end of each row of A (into the next row, or past the buffer) and past
the last row of B: garbage joins every output. Only the non-power-of-two sizes (K = 17, 1023,
63) have such a tail. On a GPU that garbage is read and the output FAILs; the interpreter lets a
kernel touch only its arguments' storage, and the read past B's end is a CRASH there.
"""

import torch
import triton
import triton.language as tl

KERNEL_TYPE = "matmul"


@triton.jit
def _matmul_kernel(
    A,
    B,
    C,
    M,
    N,
    K,
    sam,
    sak,
    sbk,
    sbn,
    scm,
    scn,
    FP64: tl.constexpr,
    BLOCK_M: tl.constexpr,
    BLOCK_N: tl.constexpr,
    BLOCK_K: tl.constexpr,
):
    pid_m = tl.program_id(0)
    pid_n = tl.program_id(1)
    offs_m = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_n = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    offs_k = tl.arange(0, BLOCK_K)
    m_mask = offs_m < M
    n_mask = offs_n < N
    if FP64:
        acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float64)
    else:
        acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for k0 in range(0, K, BLOCK_K):
        k_mask = k0 + offs_k < K
        # BUG: k_mask is left out of both masks: the K tail reads garbage
        a = tl.load(
            A + offs_m[:, None] * sam + (k0 + offs_k)[None, :] * sak,
            mask=m_mask[:, None],
            other=0.0,
        )
        b = tl.load(
            B + (k0 + offs_k)[:, None] * sbk + offs_n[None, :] * sbn,
            mask=n_mask[None, :],
            other=0.0,
        )
        if FP64:
            acc = tl.dot(a.to(tl.float64), b.to(tl.float64), acc, out_dtype=tl.float64)
        else:
            acc = tl.dot(a.to(tl.float32), b.to(tl.float32), acc, input_precision="ieee")
    tl.store(
        C + offs_m[:, None] * scm + offs_n[None, :] * scn,
        acc.to(C.dtype.element_ty),
        mask=m_mask[:, None] & n_mask[None, :],
    )


def kernel_fn(A: torch.Tensor, B: torch.Tensor) -> torch.Tensor:
    M, K = A.shape
    N = B.shape[1]
    C = torch.empty((M, N), dtype=A.dtype, device=A.device)
    block_k = min(32, max(16, triton.next_power_of_2(K)))
    grid = (triton.cdiv(M, 32), triton.cdiv(N, 32))
    _matmul_kernel[grid](
        A,
        B,
        C,
        M,
        N,
        K,
        A.stride(0),
        A.stride(1),
        B.stride(0),
        B.stride(1),
        C.stride(0),
        C.stride(1),
        FP64=A.dtype == torch.float32,
        BLOCK_M=32,
        BLOCK_N=32,
        BLOCK_K=block_k,
    )
    return C
