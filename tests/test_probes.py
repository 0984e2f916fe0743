"""Duck-typed modules are probed before they are claimed: the probe must tell a look-alike
from the real thing at the sizes and dtypes models actually have (small random init from a
config, bf16 on a GPU, trained weights far from 1), else verify plugs in a kernel that
changes the model's outputs."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F
from torch import nn

from autokernel import reference
from autokernel.model.matcher import module_kind


class GatedMLP(nn.Module):
    """gate/up/down Linears as Hugging Face names them, with a chosen activation."""

    def __init__(self, hidden: int, inter: int, act, std: float = 0.02) -> None:
        super().__init__()
        self.gate_proj = nn.Linear(hidden, inter, bias=False)
        self.up_proj = nn.Linear(hidden, inter, bias=False)
        self.down_proj = nn.Linear(inter, hidden, bias=False)
        for lin in (self.gate_proj, self.up_proj, self.down_proj):
            nn.init.normal_(lin.weight, std=std)  # what from_config gives: no checkpoint
        self.act = act

    def forward(self, x):
        return self.down_proj(self.act(self.gate_proj(x)) * self.up_proj(x))


class Norm(nn.Module):
    """An RMSNorm-shaped module whose weight enters as `scale(weight)`."""

    def __init__(self, n: int, scale, fill: float) -> None:
        super().__init__()
        self.weight = nn.Parameter(torch.full((n,), fill))
        self.eps = 1e-6
        self.scale = scale

    def forward(self, x):
        return reference.rmsnorm(x, self.scale(self.weight), self.eps)


def gelu_tanh(x):
    return F.gelu(x, approximate="tanh")


def kind(m: nn.Module, dtype: torch.dtype) -> str | None:
    torch.manual_seed(0)
    return module_kind(m.to(dtype))[0]


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16, torch.float32])
@pytest.mark.parametrize("act", [gelu_tanh, F.gelu])
def test_a_geglu_mlp_with_small_weights_is_not_swiglu(dtype, act):
    """Gemma's MLP from its config: near 0 GELU and SiLU are both x / 2, and with std 0.02
    weights the gate never leaves that range, so the probe passed it as SwiGLU in bf16."""
    assert kind(GatedMLP(64, 128, act), dtype) is None
    assert kind(GatedMLP(64, 128, act, std=0.002), dtype) is None  # even smaller: fp32 too


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16, torch.float32])
def test_a_swiglu_mlp_with_small_weights_is_still_claimed(dtype):
    assert kind(GatedMLP(64, 128, F.silu), dtype) == "fused_mlp"
    assert kind(GatedMLP(512, 1376, F.silu, std=0.002), dtype) == "fused_mlp"


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float32])
def test_a_norm_with_an_offset_weight_is_not_rmsnorm_at_any_weight(dtype):
    """Gemma's (1 + w): with trained weights far from 0 the offset is a small relative change,
    within bf16's tolerance when the probe used the module's own weight."""
    for fill in (0.0, 1.0, 200.0):
        assert kind(Norm(64, lambda w: 1 + w, fill), dtype) is None, fill


def test_a_norm_that_ignores_its_weight_is_not_rmsnorm():
    """With a fresh ones weight the module's output equals rmsnorm's: only a weight of the
    probe's own choosing shows the kernel would apply a weight the module does not."""
    assert kind(Norm(64, torch.ones_like, 1.0), torch.float32) is None


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float32])
def test_a_plain_rmsnorm_is_claimed_and_keeps_its_weight(dtype):
    norm = Norm(64, lambda w: w, 60.0)
    before = norm.weight
    assert kind(norm, dtype) == "rmsnorm"
    assert norm.weight is before and bool((norm.weight == 60.0).all())  # swapped back, untouched
