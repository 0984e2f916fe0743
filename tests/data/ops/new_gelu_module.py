"""GPT-2's NewGELUActivation as transformers writes it: eight elementwise ops in one module."""

import math

import torch
from torch import nn


class NewGELUActivation(nn.Module):
    def forward(self, input: torch.Tensor) -> torch.Tensor:
        inner = math.sqrt(2.0 / math.pi) * (input + 0.044715 * torch.pow(input, 3.0))
        return 0.5 * input * (1.0 + torch.tanh(inner))


class Model(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.act = NewGELUActivation()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.act(x)


def get_inputs() -> list[torch.Tensor]:
    return [torch.randn(32, 256, generator=torch.Generator().manual_seed(0))]


def get_init_inputs() -> list:
    return []
