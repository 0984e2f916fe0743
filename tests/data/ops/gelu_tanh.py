"""GPT-2's tanh GELU, as F.gelu(approximate='tanh')."""

import torch
import torch.nn.functional as F
from torch import nn


class Model(nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return F.gelu(x, approximate="tanh")


def get_inputs() -> list[torch.Tensor]:
    return [torch.randn(32, 256, generator=torch.Generator().manual_seed(0))]


def get_init_inputs() -> list:
    return []
