"""A residual add and a LayerNorm of the sum in one module."""

import torch
import torch.nn.functional as F
from torch import nn


class Model(nn.Module):
    def __init__(self, hidden: int = 256) -> None:
        super().__init__()
        torch.manual_seed(0)
        self.weight = nn.Parameter(1 + 0.1 * torch.randn(hidden))
        self.bias = nn.Parameter(0.1 * torch.randn(hidden))

    def forward(self, x: torch.Tensor, residual: torch.Tensor) -> torch.Tensor:
        h = x + residual
        return F.layer_norm(h, (h.shape[-1],), self.weight, self.bias, 1e-5)


def get_inputs() -> list[torch.Tensor]:
    gen = torch.Generator().manual_seed(0)
    return [torch.randn(16, 256, generator=gen), torch.randn(16, 256, generator=gen)]


def get_init_inputs() -> list:
    return [256]
