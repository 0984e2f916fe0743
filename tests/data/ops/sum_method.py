"""A sum over the last dim as a tensor method: a reduce target verify must plug in."""

import torch
from torch import nn


class Model(nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x.sum(-1)


def get_inputs() -> list[torch.Tensor]:
    return [torch.randn(16, 512, generator=torch.Generator().manual_seed(0))]


def get_init_inputs() -> list:
    return []
