"""Log-softmax over the last dim (a generic target: no kernel type computes it)."""

import torch
from torch import nn


class Model(nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.log_softmax(x, dim=-1)


def get_inputs() -> list[torch.Tensor]:
    return [torch.randn(16, 512, generator=torch.Generator().manual_seed(0))]


def get_init_inputs() -> list:
    return []
