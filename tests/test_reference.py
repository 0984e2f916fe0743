"""reference.py against independent PyTorch formulations, in float64 where both are exact."""

from __future__ import annotations

import math

import pytest
import torch
import torch.nn.functional as F

from autokernel import reference

D = torch.float64


def g(seed: int = 0) -> torch.Generator:
    return torch.Generator().manual_seed(seed)


def test_softmax_matches_torch_and_rows_sum_to_one():
    x = torch.randn(3, 5, 77, dtype=D, generator=g())
    out = reference.softmax(x)
    torch.testing.assert_close(out, F.softmax(x, dim=-1))
    torch.testing.assert_close(out.sum(-1), torch.ones(3, 5, dtype=D))


def test_softmax_keeps_low_precision_dtype_and_is_shift_invariant():
    x = torch.randn(4, 300, generator=g()).to(torch.bfloat16)
    assert reference.softmax(x).dtype == torch.bfloat16
    big = torch.full((2, 50), 3.0e4, dtype=torch.float16)
    assert torch.isfinite(reference.softmax(big)).all()


def test_layernorm_and_rmsnorm_match_functional_ops():
    x = torch.randn(2, 7, 64, dtype=D, generator=g())
    w, b = torch.randn(64, dtype=D, generator=g(1)), torch.randn(64, dtype=D, generator=g(2))
    torch.testing.assert_close(
        reference.layernorm(x, w, b, 1e-5), F.layer_norm(x, (64,), w, b, 1e-5)
    )
    torch.testing.assert_close(reference.rmsnorm(x, w, 1e-6), F.rms_norm(x, (64,), w, 1e-6))


def test_cross_entropy_skips_ignore_index_and_returns_fp32_for_half_logits():
    logits = torch.randn(6, 11, dtype=D, generator=g())
    t = torch.tensor([0, 10, -100, 3, -100, 5])
    keep = t != -100
    manual = -(logits[keep].log_softmax(-1).gather(1, t[keep, None])).mean()
    torch.testing.assert_close(reference.cross_entropy(logits, t), manual)
    assert reference.cross_entropy(logits.half(), t).dtype == torch.float32


def test_reduce_sums_last_dim():
    x = torch.randn(3, 4, 9, dtype=D, generator=g())
    torch.testing.assert_close(reference.reduce(x), x.sum(-1))


@pytest.mark.parametrize("causal", [True, False])
def test_flash_attention_matches_sdpa_including_gqa(causal):
    q = torch.randn(2, 8, 33, 16, dtype=D, generator=g())
    k = torch.randn(2, 2, 33, 16, dtype=D, generator=g(1))
    v = torch.randn(2, 2, 33, 16, dtype=D, generator=g(2))
    ref = F.scaled_dot_product_attention(q, k, v, is_causal=causal, enable_gqa=True)
    torch.testing.assert_close(reference.flash_attention(q, k, v, causal), ref)
    scaled = F.scaled_dot_product_attention(q, k, v, is_causal=causal, scale=0.3, enable_gqa=True)
    torch.testing.assert_close(reference.flash_attention(q, k, v, causal, 0.3), scaled)


def test_flash_attention_rejects_heads_that_do_not_divide():
    q = torch.randn(1, 3, 4, 8, dtype=D)
    kv = torch.randn(1, 2, 4, 8, dtype=D)
    with pytest.raises(ValueError, match="multiple"):
        reference.flash_attention(q, kv, kv)


def test_fused_mlp_is_swiglu_in_linear_layout():
    x = torch.randn(5, 8, dtype=D, generator=g())
    wg, wu = (
        torch.randn(12, 8, dtype=D, generator=g(1)),
        torch.randn(12, 8, dtype=D, generator=g(2)),
    )
    wd = torch.randn(8, 12, dtype=D, generator=g(3))
    expected = F.linear(F.silu(F.linear(x, wg)) * F.linear(x, wu), wd)
    torch.testing.assert_close(reference.fused_mlp(x, wg, wu, wd), expected)


def test_rotary_embedding_rotates_pairs_by_position_angle():
    d, seq = 8, 5
    x = torch.randn(1, 2, seq, d, dtype=D, generator=g())
    inv = 1.0 / 10000 ** (torch.arange(0, d, 2, dtype=D) / d)
    ang = torch.outer(torch.arange(seq, dtype=D), inv)
    cos, sin = torch.cat((ang, ang), -1).cos(), torch.cat((ang, ang), -1).sin()
    out = reference.rotary_embedding(x, cos, sin)
    # Pair (i, i + d/2) is rotated by angle ang[:, i]: check as complex multiplication.
    z = torch.complex(x[..., : d // 2], x[..., d // 2 :]) * torch.polar(torch.ones_like(ang), ang)
    torch.testing.assert_close(out, torch.cat((z.real, z.imag), -1))
    # Rotation preserves each pair's norm.
    torch.testing.assert_close(out.norm(dim=-1), x.norm(dim=-1))
    assert math.isclose(float(out[0, 0, 0, 0]), float(x[0, 0, 0, 0]))  # position 0: identity
