"""hf_rotary's model with apply_rotary_pos_emb wrapped as recent transformers wrap it when the
`kernels` package is installed (use_kernel_func_from_hub): the global is an nn.Module instance
of a class made for that one function, whose forward calls it; not a function any more."""

import torch
from torch import nn


def rotate_half(x):
    x1 = x[..., : x.shape[-1] // 2]
    x2 = x[..., x.shape[-1] // 2 :]
    return torch.cat((-x2, x1), dim=-1)


def hub_function(func):
    class Func(nn.Module):
        def forward(self, *args, **kwargs):
            return func(*args, **kwargs)

    Func.__module__ = func.__module__
    return Func()


@hub_function
def apply_rotary_pos_emb(q, k, cos, sin, position_ids=None, unsqueeze_dim=1):
    cos = cos.unsqueeze(unsqueeze_dim)
    sin = sin.unsqueeze(unsqueeze_dim)
    q_embed = (q * cos) + (rotate_half(q) * sin)
    k_embed = (k * cos) + (rotate_half(k) * sin)
    return q_embed, k_embed


class Model(nn.Module):
    """Query and key projections as an attention layer makes them, then the rotation."""

    def __init__(self, hidden: int = 128, heads: int = 4, kv_heads: int = 2) -> None:
        super().__init__()
        torch.manual_seed(0)
        self.heads, self.kv_heads, self.head_dim = heads, kv_heads, hidden // heads
        self.q_proj = nn.Linear(hidden, heads * self.head_dim, bias=False)
        self.k_proj = nn.Linear(hidden, kv_heads * self.head_dim, bias=False)

    def forward(self, x, cos, sin):
        b, s, _ = x.shape
        q = self.q_proj(x).view(b, s, self.heads, self.head_dim).transpose(1, 2)
        k = self.k_proj(x).view(b, s, self.kv_heads, self.head_dim).transpose(1, 2)
        return apply_rotary_pos_emb(q, k, cos, sin)


def get_inputs() -> list[torch.Tensor]:
    gen = torch.Generator().manual_seed(0)
    freqs = torch.randn(2, 64, 16, generator=gen)
    emb = torch.cat((freqs, freqs), dim=-1)
    return [torch.randn(2, 64, 128, generator=gen), emb.cos(), emb.sin()]


def get_init_inputs() -> list:
    return [128, 4, 2]
