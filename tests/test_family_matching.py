"""Forms of rotary and SwiGLU that whole model families use beyond LLaMA's, recognized by what
they compute: partial rotary (GPT-NeoX, Phi, StableLM: a prefix of each head rotated, the rest
passed through), cos/sin kept in fp32 beside bf16 q/k (OLMo2), and one Linear producing gate
and up side by side (Phi-3's gate_up_proj). Each is claimed only where the probe shows it,
and the claim's kernel calls put back together give what the model's own code gives."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F
from torch import nn

from autokernel import reference
from autokernel.model.kernel_ops import unsupported
from autokernel.model.matcher import match_function, match_module, module_kind, owned_modules

GEN = torch.Generator().manual_seed(0)


def swap_halves(x: torch.Tensor) -> torch.Tensor:
    a, b = x.chunk(2, dim=-1)
    return torch.cat((-b, a), dim=-1)


def prefix_rotary(q, k, cos, sin, unsqueeze_dim=1):
    """Rotate the first cos.shape[-1] dims of each head, keep the rest (GPT-NeoX's form)."""
    cos, sin = cos.unsqueeze(unsqueeze_dim), sin.unsqueeze(unsqueeze_dim)
    r = cos.shape[-1]
    out = []
    for t in (q, k):
        head, tail = t[..., :r], t[..., r:]
        out.append(torch.cat((head * cos + swap_halves(head) * sin, tail), dim=-1))
    return out[0], out[1]


def suffix_rotary(q, k, cos, sin, unsqueeze_dim=1):
    """Rotates the last dims instead: same shapes, another computation."""
    cos, sin = cos.unsqueeze(unsqueeze_dim), sin.unsqueeze(unsqueeze_dim)
    r = cos.shape[-1]
    out = []
    for t in (q, k):
        head, tail = t[..., :-r], t[..., -r:]
        out.append(torch.cat((head, tail * cos + swap_halves(tail) * sin), dim=-1))
    return out[0], out[1]


def upcast_rotary(q, k, cos, sin, unsqueeze_dim=1):
    """Rotate in the tables' dtype, give q/k's back (OLMo2: fp32 tables, bf16 q/k)."""
    cos, sin = cos.unsqueeze(unsqueeze_dim), sin.unsqueeze(unsqueeze_dim)
    q2 = q * cos + swap_halves(q) * sin
    k2 = k * cos + swap_halves(k) * sin
    return q2.to(q.dtype), k2.to(k.dtype)


def tables(seq: int, width: int, dtype=torch.float32) -> tuple[torch.Tensor, torch.Tensor]:
    freqs = torch.randn(1, seq, width // 2, generator=GEN)
    emb = torch.cat((freqs, freqs), dim=-1)
    return emb.cos().to(dtype), emb.sin().to(dtype)


def qk(dtype=torch.float32, heads: int = 4, seq: int = 6, dim: int = 16):
    # (B, S, H, D) projected, then heads first: the strided layout models hand over
    q = torch.randn(2, seq, heads, dim, generator=GEN).transpose(1, 2).to(dtype)
    return q, torch.randn(2, heads, seq, dim, generator=GEN).to(dtype)


def replay(match) -> object:
    """The claim with reference.py in the kernel's place."""
    return match.finish([reference.rotary_embedding(*c) for c in match.calls])


@pytest.mark.parametrize("width", [4, 8, 16])
def test_a_rotated_prefix_is_claimed_and_the_rest_passes_through(width):
    q, k = qk()
    cos, sin = tables(6, width)
    m = match_function(prefix_rotary, (q, k, cos, sin), {})
    assert m is not None and m.kind == "rotary_embedding"
    assert m.shape == {"batch": 2, "heads": 4, "seq": 6, "head_dim": width}
    x = m.op_args[0]
    assert x.data_ptr() == q.data_ptr() and x.stride() == q.stride()  # a view, not a copy
    for got, want in zip(replay(m), prefix_rotary(q, k, cos, sin), strict=True):
        torch.testing.assert_close(got, want)
    assert all(not unsupported(m.kind, c) for c in m.calls)


def test_a_rotated_suffix_is_not_rotary():
    q, k = qk()
    cos, sin = tables(6, 8)
    assert match_function(suffix_rotary, (q, k, cos, sin), {}) is None
    cos, sin = tables(6, 16)  # all of the head: the same computation as LLaMA's
    assert match_function(suffix_rotary, (q, k, cos, sin), {}) is not None


def whole_head_rotary(q, k, cos, sin, unsqueeze_dim=1):
    """LLaMA's form: the tables must be as wide as the heads."""
    cos, sin = cos.unsqueeze(unsqueeze_dim), sin.unsqueeze(unsqueeze_dim)
    return q * cos + swap_halves(q) * sin, k * cos + swap_halves(k) * sin


def test_the_partial_form_is_probed_apart_from_the_whole_head_form():
    """One function, two verdicts: a function that cannot rotate a prefix (it raises) is still
    the whole-head rotary it was, before and after a partial call was turned down."""
    q, k = qk()
    full, half = tables(6, 16), tables(6, 8)
    assert match_function(whole_head_rotary, (q, k, *full), {}) is not None
    assert match_function(whole_head_rotary, (q, k, *half), {}) is None
    assert match_function(whole_head_rotary, (q, k, *full), {}) is not None


def test_tables_too_wide_or_odd_are_not_rotary():
    q, k = qk()
    for width in (32, 5):
        cos, sin = torch.ones(1, 6, width), torch.zeros(1, 6, width)
        assert match_function(prefix_rotary, (q, k, cos, sin), {}) is None


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
def test_fp32_tables_beside_half_q_k_are_given_in_q_k_dtype(dtype):
    """OLMo2's form: with the tables left in fp32 every call fell back ("mixed dtypes"), so
    the rotary target never ran a kernel."""
    q, k = qk(dtype)
    cos, sin = tables(6, 16)
    m = match_function(upcast_rotary, (q, k, cos, sin), {})
    assert m is not None and m.kind == "rotary_embedding"
    assert all(t.dtype == dtype for c in m.calls for t in c)
    assert all(not unsupported(m.kind, c) for c in m.calls)
    for got, want in zip(replay(m), upcast_rotary(q, k, cos, sin), strict=True):
        assert got.dtype == want.dtype
        torch.testing.assert_close(got, want, atol=2e-2, rtol=2e-2)


class FusedMLP(nn.Module):
    """gate and up from one Linear, chunked; `up_first`: the up half comes first."""

    def __init__(self, hidden: int, inter: int, act=F.silu, up_first=False, bias=False) -> None:
        super().__init__()
        self.gate_up_proj = nn.Linear(hidden, 2 * inter, bias=bias)
        self.down_proj = nn.Linear(inter, hidden, bias=False)
        for lin in (self.gate_up_proj, self.down_proj):
            nn.init.normal_(lin.weight, std=0.02)  # a config's init: no checkpoint
        self.act, self.up_first = act, up_first

    def forward(self, x):
        a, b = self.gate_up_proj(x).chunk(2, dim=-1)
        gate, up = (b, a) if self.up_first else (a, b)
        return self.down_proj(self.act(gate) * up)


def kind_of(m: nn.Module, dtype: torch.dtype) -> str | None:
    torch.manual_seed(0)
    return module_kind(m.to(dtype))[0]


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize("up_first", [False, True])
def test_a_fused_gate_up_mlp_is_claimed_with_views_of_its_weight(dtype, up_first):
    mlp = FusedMLP(64, 96, up_first=up_first).to(dtype)
    assert kind_of(mlp, dtype) == "fused_mlp"
    assert set(owned_modules(mlp)) == {mlp.gate_up_proj, mlp.down_proj}
    x = torch.randn(3, 5, 64, generator=GEN).to(dtype)
    m = match_module(mlp, (x,), {})
    assert m is not None and m.shape == {"M": 15, "hidden": 64, "inter": 96}
    _, w_gate, w_up, w_down = m.op_args
    fused = mlp.gate_up_proj.weight
    starts = {w_gate.data_ptr(), w_up.data_ptr()}
    assert starts == {fused.data_ptr(), fused[96:].data_ptr()}  # views, no copy
    assert w_gate.is_contiguous() and w_up.is_contiguous() and w_down is mlp.down_proj.weight
    assert (w_gate.data_ptr() == fused.data_ptr()) != up_first
    torch.testing.assert_close(reference.fused_mlp(*m.op_args), mlp(x), atol=2e-3, rtol=2e-2)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_fused_mlps_that_are_not_swiglu_are_left_alone(dtype):
    assert kind_of(FusedMLP(64, 96, act=F.gelu), dtype) is None  # GeGLU, fused
    assert kind_of(FusedMLP(64, 96, bias=True), dtype) is None


def test_an_up_projection_not_twice_the_down_input_is_not_fused():
    mlp = FusedMLP(64, 96)
    mlp.down_proj = nn.Linear(192, 64, bias=False)  # a plain GELU MLP's shapes
    assert module_kind(mlp) == (None, "") and owned_modules(mlp) == ()
