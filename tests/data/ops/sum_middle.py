"""A sum over a middle dim."""

import torch
from torch import nn


class Model(nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.sum(x, dim=1)


def get_inputs() -> list[torch.Tensor]:
    return [torch.randn(4, 64, 32, generator=torch.Generator().manual_seed(0))]


def get_init_inputs() -> list:
    return []
