"""Spec of flash_attention: causal and full attention with grouped-query K/V."""

from __future__ import annotations

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


def _inputs(size, dtype, gen, device):
    """causal defaults to on; a size with causal=0 asks for full (bidirectional) attention."""
    return (*_qkv(size, dtype, gen, device), bool(size.get("causal", 1)), None)


def _large_scores(size, dtype, gen, device):
    # Scores of +-hundreds: the running max must be subtracted before exp.
    return (*_qkv(size, dtype, gen, device, scale=6.0), bool(size.get("causal", 1)), None)


def _explicit_scale(size, dtype, gen, device):
    # A caller-chosen sm_scale (not 1/sqrt(d)), as some models pass one.
    return (*_qkv(size, dtype, gen, device, scale=2.0), bool(size.get("causal", 1)), 0.3)


def _flops(size):
    b, hq, _, s, d = (size[k] for k in DIMS)
    full = 4.0 * b * hq * s * s * d
    return full / 2 if size.get("causal", 1) else full


def _bytes(size, dtype):
    b, hq, hkv, s, d = (size[k] for k in DIMS)
    return (2 * b * hq * s * d + 2 * b * hkv * s * d) * dtype.itemsize


def _eager(q, k, v, causal, sm_scale):
    """PyTorch's fused SDPA (flash backend on Hopper for fp16/bf16)."""
    return F.scaled_dot_product_attention(
        q, k, v, is_causal=causal, scale=sm_scale, enable_gqa=k.shape[1] != q.shape[1]
    )


def _s(b, hq, hkv, s, d, causal=1):
    size = {"batch": b, "heads": hq, "kv_heads": hkv, "seq": s, "head_dim": d}
    if not causal:
        size["causal"] = 0
    return size


FLASH_ATTENTION = KernelSpec(
    name="flash_attention",
    arg_names=("Q", "K", "V", "causal", "sm_scale"),
    dims=DIMS,
    make_inputs=_inputs,
    flops=_flops,
    bytes_moved=_bytes,
    bound="compute",
    gpu=SizeSet(
        smoke=_s(1, 4, 4, 128, 64),
        sweep=(
            _s(1, 8, 8, 128, 64),
            _s(2, 16, 16, 512, 128),
            _s(1, 32, 8, 1024, 128),
            _s(4, 8, 8, 256, 64, causal=0),
            _s(1, 16, 16, 2048, 128),
            _s(2, 8, 2, 2048, 64),
            _s(1, 32, 32, 4096, 128),
            _s(1, 16, 4, 1024, 128, causal=0),
            _s(8, 4, 4, 64, 128),
        ),
        odd=(
            _s(1, 8, 8, 1023, 128),
            _s(2, 4, 2, 1537, 64),
            _s(1, 4, 1, 4097, 128, causal=0),
        ),
        bench=(
            _s(4, 32, 32, 2048, 128),
            _s(2, 32, 32, 4096, 128),
            _s(1, 32, 32, 8192, 128),
            _s(2, 32, 8, 4096, 128),
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
        ),
        odd=(
            _s(1, 2, 1, 127, 64),
            _s(1, 3, 3, 67, 32, causal=0),
            _s(1, 1, 1, 257, 16),
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
    ),
    reference=reference.flash_attention,
    eager=_eager,
    model=FLASH_ATTENTION_MODEL,
)
