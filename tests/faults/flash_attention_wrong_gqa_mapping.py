# expect: FAIL sweep
"""Planted fault: grouped-query attention maps query head h to key/value head h % kv_heads
instead of h // (heads // kv_heads).

Identical when kv_heads == heads (the smoke input) or kv_heads == 1; the sweep's
(1, 4, 2, 128, 32) size sends query head 1 to kv head 1 instead of 0.
"""

import torch
import triton
import triton.language as tl

KERNEL_TYPE = "flash_attention"


@triton.jit
def _attn_kernel(
    Q,
    K,
    V,
    O,
    sqb,
    sqh,
    sqs,
    skb,
    skh,
    sks,
    svb,
    svh,
    svs,
    sob,
    soh,
    sos,
    heads_q,
    group,
    seq,
    head_dim,
    scale,
    CAUSAL: tl.constexpr,
    BLOCK_M: tl.constexpr,
    BLOCK_N: tl.constexpr,
    BLOCK_D: tl.constexpr,
):
    pid_m = tl.program_id(0)
    bh = tl.program_id(1)
    b = bh // heads_q
    h = bh % heads_q
    hk = h % (heads_q // group)  # BUG: should be h // group
    offs_m = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_d = tl.arange(0, BLOCK_D)
    m_mask = offs_m < seq
    d_mask = offs_d < head_dim
    q = tl.load(
        Q + b * sqb + h * sqh + offs_m[:, None] * sqs + offs_d[None, :],
        mask=m_mask[:, None] & d_mask[None, :],
        other=0.0,
    ).to(tl.float32)
    m_i = tl.full([BLOCK_M], -float("inf"), tl.float32)
    l_i = tl.zeros([BLOCK_M], tl.float32)
    acc = tl.zeros([BLOCK_M, BLOCK_D], tl.float32)
    for start in range(0, seq, BLOCK_N):
        offs_n = start + tl.arange(0, BLOCK_N)
        n_mask = offs_n < seq
        kv_mask = n_mask[:, None] & d_mask[None, :]
        k = tl.load(
            K + b * skb + hk * skh + offs_n[:, None] * sks + offs_d[None, :],
            mask=kv_mask,
            other=0.0,
        ).to(tl.float32)
        v = tl.load(
            V + b * svb + hk * svh + offs_n[:, None] * svs + offs_d[None, :],
            mask=kv_mask,
            other=0.0,
        ).to(tl.float32)
        s = tl.dot(q, tl.trans(k), input_precision="ieee") * scale
        valid = n_mask[None, :]
        if CAUSAL:
            valid = valid & (offs_n[None, :] <= offs_m[:, None])
        s = tl.where(valid, s, -float("inf"))
        m_new = tl.maximum(m_i, tl.max(s, axis=1))
        shift = tl.where(m_new == -float("inf"), 0.0, m_new)
        p = tl.exp(s - shift[:, None])
        alpha = tl.exp(m_i - shift)
        l_i = l_i * alpha + tl.sum(p, axis=1)
        acc = acc * alpha[:, None] + tl.dot(p, v, input_precision="ieee")
        m_i = m_new
    out = acc / l_i[:, None]
    tl.store(
        O + b * sob + h * soh + offs_m[:, None] * sos + offs_d[None, :],
        out.to(O.dtype.element_ty),
        mask=m_mask[:, None] & d_mask[None, :],
    )


def kernel_fn(Q, K, V, causal=True, sm_scale=None, attn_mask=None):
    batch, heads_q, seq, head_dim = Q.shape
    heads_kv = K.shape[1]
    scale = sm_scale if sm_scale is not None else head_dim**-0.5
    O = torch.empty(Q.shape, dtype=Q.dtype, device=Q.device)
    block_m = 16
    block_n = 16
    grid = (triton.cdiv(seq, block_m), batch * heads_q)
    _attn_kernel[grid](
        Q,
        K,
        V,
        O,
        Q.stride(0),
        Q.stride(1),
        Q.stride(2),
        K.stride(0),
        K.stride(1),
        K.stride(2),
        V.stride(0),
        V.stride(1),
        V.stride(2),
        O.stride(0),
        O.stride(1),
        O.stride(2),
        heads_q,
        heads_q // heads_kv,
        seq,
        head_dim,
        scale,
        CAUSAL=bool(causal),
        BLOCK_M=block_m,
        BLOCK_N=block_n,
        BLOCK_D=max(16, triton.next_power_of_2(head_dim)),
    )
    return O
