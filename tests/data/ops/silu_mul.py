"""SiLU(a) * b, the gating of a SwiGLU without its products: one fused elementwise region."""

import torch
import torch.nn.functional as F
from torch import nn


class Model(nn.Module):
    def forward(self, a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        return F.silu(a) * b


def get_inputs() -> list[torch.Tensor]:
    gen = torch.Generator().manual_seed(0)
    return [torch.randn(32, 256, generator=gen), torch.randn(32, 256, generator=gen)]


def get_init_inputs() -> list:
    return []
