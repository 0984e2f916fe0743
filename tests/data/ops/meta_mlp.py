"""A SwiGLU MLP with Meta's w1/w3/w2 names and an RMSNorm whose class is not named RMSNorm:
both kernel types by what they compute."""

import torch
import torch.nn.functional as F
from torch import nn


class Norm(nn.Module):
    def __init__(self, dim: int) -> None:
        super().__init__()
        self.weight = nn.Parameter(torch.ones(dim))
        self.eps = 1e-6

    def forward(self, x):
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps) * self.weight


class FeedForward(nn.Module):
    def __init__(self, dim: int, hidden: int) -> None:
        super().__init__()
        self.w1 = nn.Linear(dim, hidden, bias=False)
        self.w2 = nn.Linear(hidden, dim, bias=False)
        self.w3 = nn.Linear(dim, hidden, bias=False)

    def forward(self, x):
        return self.w2(F.silu(self.w1(x)) * self.w3(x))


class Model(nn.Module):
    def __init__(self, dim: int = 64, hidden: int = 128) -> None:
        super().__init__()
        torch.manual_seed(0)
        self.norm = Norm(dim)
        self.ffn = FeedForward(dim, hidden)

    def forward(self, x):
        return self.ffn(self.norm(x))


def get_inputs() -> list[torch.Tensor]:
    return [torch.randn(2, 16, 64, generator=torch.Generator().manual_seed(0))]


def get_init_inputs() -> list:
    return [64, 128]
