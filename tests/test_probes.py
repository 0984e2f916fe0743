"""Duck-typed modules are probed before they are claimed: the probe must tell a look-alike
from the real thing at the sizes and dtypes models actually have (small random init from a
config, bf16 on a GPU, trained weights far from 1), else verify plugs in a kernel that
changes the model's outputs."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F
from torch import nn

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
