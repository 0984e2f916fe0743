"""Spec of flash_attention: causal and full attention with grouped-query K/V, and full attention
under a caller's mask (scaled_dot_product_attention's attn_mask)."""

from __future__ import annotations

import torch
import torch.nn.functional as F

from autokernel import reference
from autokernel.specs.attention_model import FLASH_ATTENTION_MODEL
from autokernel.specs.base import Adversarial, KernelSpec, SizeSet, randn

DIMS = ("batch", "heads", "kv_heads", "seq", "head_dim")


def _qkv(size, dtype, gen, device, scale: float = 1.0):
    b, hq, hkv, s, d = (size[k] for k in DIMS)
    q = randn((b, hq, s, d), dtype, gen, device, scale=scale)
    k = randn((b, hkv, s, d), dtype, gen, device, scale=scale)
    v = randn((b, hkv, s, d), dtype, gen, device)
    return q, k, v


def _mask(size, dtype, gen, device) -> torch.Tensor | None:
    """The attn_mask a size asks for. mask=1: a padding mask as Hugging Face builds it, bool
    (batch, 1, 1, seq_k) expanded over the queries (stride 0), each sequence with its own
    length; mask=2: an additive (batch, 1, seq_q, seq_k) mask in the inputs' dtype, 0 or -inf
    at random, some rows wholly -inf (their output is zeros)."""
    kind = size.get("mask", 0)
    if not kind:
        return None
    b, s = size["batch"], size["seq"]
    u = torch.rand((b, 1, s, s), generator=gen, device=gen.device).to(device)
    if kind == 1:
        lengths = (torch.rand((b, 1, 1, 1), generator=gen, device=gen.device) * s).to(device)
        keys = torch.arange(s, device=device).view(1, 1, 1, s)
        return (keys <= lengths.clamp(min=1).floor()).expand(b, 1, s, s)
    bias = torch.where(u < 0.3, float("-inf"), 0.0)
    bias[:, :, :: max(1, s // 3)] = float("-inf")  # queries that see no key
    return bias.to(dtype)


def _inputs(size, dtype, gen, device):
    """causal defaults to on; a size with causal=0 asks for full (bidirectional) attention,
    one with mask=1 or 2 for full attention under that mask (see _mask)."""
    causal = bool(size.get("causal", 1)) and not size.get("mask", 0)
    q, k, v = _qkv(size, dtype, gen, device)
    return q, k, v, causal, None, _mask(size, dtype, gen, device)


def _large_scores(size, dtype, gen, device):
    # Scores of +-hundreds: the running max must be subtracted before exp.
    return (*_qkv(size, dtype, gen, device, scale=6.0), bool(size.get("causal", 1)), None, None)


def _explicit_scale(size, dtype, gen, device):
    # A caller-chosen sm_scale (not 1/sqrt(d)), as some models pass one.
    return (*_qkv(size, dtype, gen, device, scale=2.0), bool(size.get("causal", 1)), 0.3, None)


def _big_negative_mask(size, dtype, gen, device):
    # Additive masks of finfo(dtype).min, as Hugging Face writes them: times log2(e) that
    # overflows fp32 to -inf, and a row of them only is a uniform average, not zeros.
    q, k, v = _qkv(size, dtype, gen, device)
    b, s = size["batch"], size["seq"]
    u = torch.rand((b, 1, s, s), generator=gen, device=gen.device).to(device)
    bias = torch.where(u < 0.5, torch.finfo(dtype).min, 0.0)
    bias[:, :, ::7] = torch.finfo(dtype).min
    return q, k, v, False, None, bias.to(dtype)


def _flops(size):
    b, hq, _, s, d = (size[k] for k in DIMS)
    full = 4.0 * b * hq * s * s * d
    return full / 2 if size.get("causal", 1) and not size.get("mask", 0) else full


def _bytes(size, dtype):
    b, hq, hkv, s, d = (size[k] for k in DIMS)
    return (2 * b * hq * s * d + 2 * b * hkv * s * d) * dtype.itemsize


def _eager(q, k, v, causal, sm_scale, attn_mask=None):
    """PyTorch's fused SDPA (flash backend on Hopper for fp16/bf16; a masked call takes the
    memory-efficient or math backend)."""
    return F.scaled_dot_product_attention(
        q, k, v, attn_mask=attn_mask, is_causal=causal, scale=sm_scale,
        enable_gqa=k.shape[1] != q.shape[1],
    )  # fmt: skip


def _s(b, hq, hkv, s, d, causal=1, mask=0):
    size = {"batch": b, "heads": hq, "kv_heads": hkv, "seq": s, "head_dim": d}
    if not causal or mask:
        size["causal"] = 0
    if mask:
        size["mask"] = mask
    return size


FLASH_ATTENTION = KernelSpec(
    name="flash_attention",
    arg_names=("Q", "K", "V", "causal", "sm_scale", "attn_mask"),
    dims=DIMS,
    make_inputs=_inputs,
    flops=_flops,
    bytes_moved=_bytes,
    bound="compute",
    options={"causal": (0, 1), "mask": (0, 1, 2)},
    gpu=SizeSet(
        smoke=_s(1, 4, 4, 128, 64),
        sweep=(
            _s(1, 8, 8, 128, 64),
            _s(2, 16, 16, 512, 128),
            _s(1, 32, 8, 1024, 128),
            _s(4, 8, 8, 256, 64, causal=0),
            _s(2, 8, 2, 2048, 64),
            _s(1, 32, 32, 4096, 128),
            _s(1, 16, 4, 1024, 128, causal=0),
            _s(8, 4, 4, 64, 128),
            _s(4, 16, 16, 1024, 64, mask=1),
            _s(2, 8, 2, 512, 128, mask=2),
        ),
        odd=(
            _s(1, 8, 8, 1023, 128),
            _s(2, 4, 2, 1537, 64),
            _s(1, 4, 1, 4097, 128, causal=0),
            _s(3, 4, 4, 777, 64, mask=1),
        ),
        bench=(
            _s(4, 32, 32, 2048, 128),
            _s(2, 32, 32, 4096, 128),
            _s(1, 32, 32, 8192, 128),
            _s(2, 32, 8, 4096, 128),
            _s(4, 16, 16, 1024, 64, mask=1),
        ),
    ),
    cpu=SizeSet(
        smoke=_s(1, 2, 2, 16, 16),
        sweep=(
            _s(1, 1, 1, 1, 16),
            _s(1, 2, 2, 16, 16),
            _s(1, 2, 1, 64, 32),
            _s(2, 2, 2, 32, 64, causal=0),
            _s(1, 4, 2, 128, 32),
            _s(1, 2, 2, 100, 64),
            _s(2, 1, 1, 64, 16, causal=0),
            _s(1, 2, 2, 256, 16),
            _s(2, 2, 2, 48, 32, mask=1),
            _s(2, 2, 1, 40, 16, mask=2),
        ),
        odd=(
            _s(1, 2, 1, 127, 64),
            _s(1, 3, 3, 67, 32, causal=0),
            _s(1, 1, 1, 257, 16),
            _s(3, 2, 2, 37, 32, mask=1),
        ),
        bench=(_s(1, 2, 2, 128, 64),),
    ),
    adversarial=(
        Adversarial(
            "large_scores",
            _large_scores,
            "scores of +-hundreds: needs the running max",
            _s(1, 8, 8, 1024, 128),
            _s(1, 2, 2, 48, 32),
        ),
        Adversarial(
            "explicit_scale",
            _explicit_scale,
            "sm_scale=0.3 given by the caller",
            _s(1, 8, 2, 512, 64, causal=0),
            _s(1, 2, 1, 40, 16, causal=0),
        ),
        Adversarial(
            "big_negative_mask",
            _big_negative_mask,
            "an additive mask of finfo.min: overflows fp32 once scaled by log2(e)",
            _s(2, 8, 8, 512, 64, mask=2),
            _s(2, 2, 2, 33, 16, mask=2),
        ),
    ),
    reference=reference.flash_attention,
    eager=_eager,
    model=FLASH_ATTENTION_MODEL,
)
