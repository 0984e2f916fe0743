"""A small BERT-style encoder classifier (KernelBench convention: Model, get_inputs,
get_init_inputs).

Word, position and token-type embeddings with a LayerNorm, post-LayerNorm encoder layers with
bidirectional attention through F.scaled_dot_product_attention and a GELU MLP, then a pooler on
the first token and a classifier whose logits go through a softmax. Sizes are small so a CPU
forward in float32 takes milliseconds.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

VOCAB = 512
MAX_POSITIONS = 128
HIDDEN = 128
HEADS = 4
INTERMEDIATE = 512
LAYERS = 2
CLASSES = 8
BATCH = 2
SEQ = 64
EPS = 1e-12
SEED = 0


class SelfAttention(nn.Module):
    def __init__(self, hidden: int, heads: int) -> None:
        super().__init__()
        self.heads = heads
        self.query = nn.Linear(hidden, hidden)
        self.key = nn.Linear(hidden, hidden)
        self.value = nn.Linear(hidden, hidden)
        self.output = nn.Linear(hidden, hidden)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b, t, c = x.shape
        q, k, v = (
            proj(x).view(b, t, self.heads, c // self.heads).transpose(1, 2)
            for proj in (self.query, self.key, self.value)
        )
        y = F.scaled_dot_product_attention(q, k, v, is_causal=False)
        return self.output(y.transpose(1, 2).reshape(b, t, c))


class EncoderLayer(nn.Module):
    def __init__(self, hidden: int, heads: int, intermediate: int) -> None:
        super().__init__()
        self.attention = SelfAttention(hidden, heads)
        self.attention_norm = nn.LayerNorm(hidden, eps=EPS)
        self.intermediate = nn.Linear(hidden, intermediate)
        self.output = nn.Linear(intermediate, hidden)
        self.output_norm = nn.LayerNorm(hidden, eps=EPS)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.attention_norm(x + self.attention(x))
        return self.output_norm(x + self.output(F.gelu(self.intermediate(x))))


class Model(nn.Module):
    def __init__(
        self,
        vocab: int = VOCAB,
        max_positions: int = MAX_POSITIONS,
        hidden: int = HIDDEN,
        heads: int = HEADS,
        intermediate: int = INTERMEDIATE,
        layers: int = LAYERS,
        classes: int = CLASSES,
    ) -> None:
        super().__init__()
        torch.manual_seed(SEED)  # the same weights every run, so profiles and checks repeat
        self.word_embeddings = nn.Embedding(vocab, hidden)
        self.position_embeddings = nn.Embedding(max_positions, hidden)
        self.token_type_embeddings = nn.Embedding(2, hidden)
        self.embeddings_norm = nn.LayerNorm(hidden, eps=EPS)
        self.layers = nn.ModuleList(
            EncoderLayer(hidden, heads, intermediate) for _ in range(layers)
        )
        self.pooler = nn.Linear(hidden, hidden)
        self.classifier = nn.Linear(hidden, classes)

    def forward(self, idx: torch.Tensor) -> torch.Tensor:
        pos = torch.arange(idx.shape[1], device=idx.device)
        x = self.word_embeddings(idx) + self.position_embeddings(pos)
        x = self.embeddings_norm(x + self.token_type_embeddings(torch.zeros_like(idx)))
        for layer in self.layers:
            x = layer(x)
        pooled = torch.tanh(self.pooler(x[:, 0]))
        return torch.softmax(self.classifier(pooled), dim=-1)


def get_inputs() -> list[torch.Tensor]:
    gen = torch.Generator().manual_seed(SEED)
    return [torch.randint(0, VOCAB, (BATCH, SEQ), generator=gen)]


def get_init_inputs() -> list:
    return [VOCAB, MAX_POSITIONS, HIDDEN, HEADS, INTERMEDIATE, LAYERS, CLASSES]
