"""A small GPT-2-style language model (KernelBench convention: Model, get_inputs, get_init_inputs).

Token embedding plus learned positions, pre-LayerNorm blocks with causal self-attention through
F.scaled_dot_product_attention and a GELU MLP, a final LayerNorm and a linear LM head. The sizes
are small so that a CPU forward in float32 takes milliseconds; raise them for a GPU profile.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

VOCAB = 512
MAX_POSITIONS = 128
HIDDEN = 128
HEADS = 4
LAYERS = 2
BATCH = 2
SEQ = 64
SEED = 0


class CausalSelfAttention(nn.Module):
    def __init__(self, hidden: int, heads: int) -> None:
        super().__init__()
        self.heads = heads
        self.c_attn = nn.Linear(hidden, 3 * hidden)
        self.c_proj = nn.Linear(hidden, hidden)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b, t, c = x.shape
        q, k, v = self.c_attn(x).split(c, dim=-1)
        q, k, v = (z.view(b, t, self.heads, c // self.heads).transpose(1, 2) for z in (q, k, v))
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        return self.c_proj(y.transpose(1, 2).reshape(b, t, c))


class MLP(nn.Module):
    def __init__(self, hidden: int) -> None:
        super().__init__()
        self.c_fc = nn.Linear(hidden, 4 * hidden)
        self.c_proj = nn.Linear(4 * hidden, hidden)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.c_proj(F.gelu(self.c_fc(x), approximate="tanh"))


class Block(nn.Module):
    def __init__(self, hidden: int, heads: int) -> None:
        super().__init__()
        self.ln_1 = nn.LayerNorm(hidden)
        self.attn = CausalSelfAttention(hidden, heads)
        self.ln_2 = nn.LayerNorm(hidden)
        self.mlp = MLP(hidden)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x + self.attn(self.ln_1(x))
        return x + self.mlp(self.ln_2(x))


class Model(nn.Module):
    def __init__(
        self,
        vocab: int = VOCAB,
        max_positions: int = MAX_POSITIONS,
        hidden: int = HIDDEN,
        heads: int = HEADS,
        layers: int = LAYERS,
    ) -> None:
        super().__init__()
        torch.manual_seed(SEED)  # the same weights every run, so profiles and checks repeat
        self.wte = nn.Embedding(vocab, hidden)
        self.wpe = nn.Embedding(max_positions, hidden)
        self.blocks = nn.ModuleList(Block(hidden, heads) for _ in range(layers))
        self.ln_f = nn.LayerNorm(hidden)
        self.lm_head = nn.Linear(hidden, vocab, bias=False)

    def forward(self, idx: torch.Tensor) -> torch.Tensor:
        pos = torch.arange(idx.shape[1], device=idx.device)
        x = self.wte(idx) + self.wpe(pos)
        for block in self.blocks:
            x = block(x)
        return self.lm_head(self.ln_f(x))


def get_inputs() -> list[torch.Tensor]:
    gen = torch.Generator().manual_seed(SEED)
    return [torch.randint(0, VOCAB, (BATCH, SEQ), generator=gen)]


def get_init_inputs() -> list:
    return [VOCAB, MAX_POSITIONS, HIDDEN, HEADS, LAYERS]
