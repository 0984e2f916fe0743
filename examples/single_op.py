"""One op, one target: a softmax over the last dim (KernelBench convention).

The smallest model `autokernel profile` accepts; its plan holds exactly one softmax target.
"""

from __future__ import annotations

import torch
from torch import nn

ROWS = 256
COLS = 1024
SEED = 0


class Model(nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.softmax(x, dim=-1)


def get_inputs() -> list[torch.Tensor]:
    gen = torch.Generator().manual_seed(SEED)
    return [torch.randn(ROWS, COLS, generator=gen)]


def get_init_inputs() -> list:
    return []
