"""Softmax over the last dim as a tensor method: a softmax target verify must plug in."""

import torch
from torch import nn


class Model(nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x.softmax(-1)


def get_inputs() -> list[torch.Tensor]:
    return [torch.randn(16, 256, generator=torch.Generator().manual_seed(0))]


def get_init_inputs() -> list:
    return []
