"""PyTorch oracles for the nine kernel types: the correctness ground truth.

Each function is the ``kernel_fn`` contract for its type: a candidate kernel takes the same
arguments and returns the same shape and dtype. They compute as real models do: low-precision
inputs are upcast to float32 for the arithmetic that models upcast (norms, softmax, losses,
attention), and results return in the input dtype. Called with float64 tensors they compute in
float64, which is how the harness builds the exact answer a candidate is compared against.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F

IGNORE_INDEX = -100  # targets equal to this are skipped, as in torch.nn.functional.cross_entropy


def _acc(dtype: torch.dtype) -> torch.dtype:
    """float32 for half types, float64 stays float64: the precision models accumulate in."""
    return torch.promote_types(dtype, torch.float32)


def matmul(A: torch.Tensor, B: torch.Tensor) -> torch.Tensor:
    """C = A @ B for A (M, K) and B (K, N); fp32 accumulation, result in A's dtype."""
    return torch.matmul(A.to(_acc(A.dtype)), B.to(_acc(B.dtype))).to(A.dtype)


def softmax(x: torch.Tensor) -> torch.Tensor:
    """Softmax over the last dim, any leading dims; computed in fp32 as attention and heads do."""
    return torch.softmax(x.to(_acc(x.dtype)), dim=-1).to(x.dtype)


def layernorm(
    x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor, eps: float = 1e-5
) -> torch.Tensor:
    """LayerNorm over the last dim (biased variance), any leading dims; fp32 statistics."""
    acc = _acc(x.dtype)
    xf = x.to(acc)
    mean = xf.mean(dim=-1, keepdim=True)
    var = (xf - mean).square().mean(dim=-1, keepdim=True)
    y = (xf - mean) * torch.rsqrt(var + eps)
    return (y * weight.to(acc) + bias.to(acc)).to(x.dtype)


def rmsnorm(x: torch.Tensor, weight: torch.Tensor, eps: float = 1e-6) -> torch.Tensor:
    """RMSNorm over the last dim as LLaMA applies it: x * rsqrt(mean(x^2) + eps) * weight.

    Statistics in fp32; the normalized value is scaled by the weight before the single cast back
    to the input dtype.
    """
    acc = _acc(x.dtype)
    xf = x.to(acc)
    y = xf * torch.rsqrt(xf.square().mean(dim=-1, keepdim=True) + eps)
    return (y * weight.to(acc)).to(x.dtype)


def cross_entropy(logits: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
    """Mean token cross-entropy of logits (N, V) against int64 targets (N,).

    Logits are upcast to fp32 as language models do before the loss, so the result is a float32
    scalar (float64 for float64 logits). Targets equal to IGNORE_INDEX (-100) are skipped and the
    mean is over the remaining rows.
    """
    return F.cross_entropy(logits.to(_acc(logits.dtype)), targets, ignore_index=IGNORE_INDEX)


def reduce(x: torch.Tensor) -> torch.Tensor:
    """Sum over the last dim, any leading dims; fp32 accumulation, result in the input dtype."""
    return x.to(_acc(x.dtype)).sum(dim=-1).to(x.dtype)


def flash_attention(
    Q: torch.Tensor,
    K: torch.Tensor,
    V: torch.Tensor,
    causal: bool = True,
    sm_scale: float | None = None,
    attn_mask: torch.Tensor | None = None,
) -> torch.Tensor:
    """softmax(Q K^T * sm_scale [+ causal mask] [+ attn_mask]) V on (batch, heads, seq, head_dim).

    K and V may have fewer heads than Q (grouped-query attention): query head h reads key/value
    head h // (heads_q // heads_kv). sm_scale defaults to 1/sqrt(head_dim). The causal mask is
    aligned top-left (query i sees keys 0..i), as torch's scaled_dot_product_attention does.
    attn_mask, broadcastable to (batch, heads, seq_q, seq_k), is scaled_dot_product_attention's:
    a bool mask says which keys a query sees, a floating one is added to the scaled scores. A
    query that sees no key gets zeros, as torch's safe softmax gives (not NaN). Scores and
    softmax in fp32; output in Q's dtype.
    """
    acc = _acc(Q.dtype)
    heads_q, heads_kv = Q.shape[1], K.shape[1]
    if heads_q % heads_kv:
        raise ValueError(
            f"query heads ({heads_q}) must be a multiple of key/value heads ({heads_kv})"
        )
    group = heads_q // heads_kv
    k = K.to(acc).repeat_interleave(group, dim=1)
    v = V.to(acc).repeat_interleave(group, dim=1)
    scale = sm_scale if sm_scale is not None else 1.0 / math.sqrt(Q.shape[-1])
    scores = torch.matmul(Q.to(acc), k.transpose(-2, -1)) * scale
    if causal:
        sq, sk = scores.shape[-2], scores.shape[-1]
        mask = torch.ones(sq, sk, dtype=torch.bool, device=Q.device).tril()
        scores = scores.masked_fill(~mask, float("-inf"))
    if attn_mask is not None:
        if attn_mask.dtype == torch.bool:
            scores = scores.masked_fill(~attn_mask, float("-inf"))
        else:
            scores = scores + attn_mask.to(acc)
    probs = torch.softmax(scores, dim=-1)
    # A row of -inf only: softmax gives NaN, torch's safe softmax (and a flash kernel) zeros.
    probs = probs.masked_fill(torch.isneginf(scores).all(dim=-1, keepdim=True), 0.0)
    return torch.matmul(probs, v).to(Q.dtype)


def fused_mlp(
    x: torch.Tensor, w_gate: torch.Tensor, w_up: torch.Tensor, w_down: torch.Tensor
) -> torch.Tensor:
    """SwiGLU MLP as LLaMA-family models apply it: down(silu(gate(x)) * up(x)).

    x is (..., hidden); weights use nn.Linear's (out_features, in_features) layout: w_gate and
    w_up (intermediate, hidden), w_down (hidden, intermediate). Matmuls accumulate in fp32; the
    intermediate activation is kept in fp32 and the result cast to x's dtype.
    """
    acc = _acc(x.dtype)
    xf = x.to(acc)
    h = F.silu(xf @ w_gate.to(acc).T) * (xf @ w_up.to(acc).T)
    return (h @ w_down.to(acc).T).to(x.dtype)


def rotary_embedding(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    """Rotary position embedding as LLaMA applies it (rotate_half convention).

    x is (batch, heads, seq, head_dim); cos and sin are (seq, head_dim), the second half of each
    row repeating the first (cat(freqs, freqs)). out = x * cos + rotate_half(x) * sin with
    rotate_half(x) = cat(-x[..., d/2:], x[..., :d/2]). Computed in fp32, output in x's dtype.
    """
    acc = _acc(x.dtype)
    xf = x.to(acc)
    half = x.shape[-1] // 2
    rotated = torch.cat((-xf[..., half:], xf[..., :half]), dim=-1)
    return (xf * cos.to(acc) + rotated * sin.to(acc)).to(x.dtype)


KERNEL_TYPES: tuple[str, ...] = (
    "matmul",
    "flash_attention",
    "fused_mlp",
    "softmax",
    "layernorm",
    "rmsnorm",
    "cross_entropy",
    "rotary_embedding",
    "reduce",
)
