"""A small LLaMA-style language model (KernelBench convention: Model, get_inputs, get_init_inputs).

RMSNorm computed in fp32, rotary position embeddings (rotate_half convention, as
reference.rotary_embedding), grouped-query causal attention through
F.scaled_dot_product_attention, a SwiGLU MLP (gate_proj, up_proj, down_proj) and bias-free
linears. The default sizes run a float32 CPU forward in milliseconds.
"""

from __future__ import annotations

import os

import torch
import torch.nn.functional as F
from torch import nn

# AUTOKERNEL_EXAMPLE_SIZE=gpu gives widths worth profiling on a GPU (a 1B-class LLaMA layer:
# hidden 2048, head_dim 128, 8192 tokens per forward); the default keeps a CPU forward fast.
SIZES = {
    "small": (512, 128, 4, 2, 344, 2, 2, 64),
    "gpu": (32000, 2048, 16, 8, 5632, 2, 4, 2048),
}
SIZE = os.environ.get("AUTOKERNEL_EXAMPLE_SIZE", "small")
if SIZE not in SIZES:
    raise ValueError(f"AUTOKERNEL_EXAMPLE_SIZE={SIZE!r}: use one of {', '.join(SIZES)}")
VOCAB, HIDDEN, HEADS, KV_HEADS, INTERMEDIATE, LAYERS, BATCH, SEQ = SIZES[SIZE]
EPS = 1e-6
ROPE_THETA = 10000.0
SEED = 0


class RMSNorm(nn.Module):
    def __init__(self, hidden: int, eps: float = EPS) -> None:
        super().__init__()
        self.weight = nn.Parameter(torch.ones(hidden))
        self.eps = eps

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        # Statistics in fp32 whatever the model dtype: bf16 squares lose too much precision.
        xf = x.float()
        y = xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + self.eps)
        return (y * self.weight.float()).to(x.dtype)


def rotary_tables(
    seq: int, head_dim: int, dtype: torch.dtype, device: torch.device
) -> tuple[torch.Tensor, torch.Tensor]:
    """cos and sin of shape (seq, head_dim), the second half of each row repeating the first."""
    inv_freq = 1.0 / ROPE_THETA ** (torch.arange(0, head_dim, 2, dtype=torch.float32) / head_dim)
    freqs = torch.outer(torch.arange(seq, dtype=torch.float32), inv_freq)
    emb = torch.cat((freqs, freqs), dim=-1)
    return emb.cos().to(device=device, dtype=dtype), emb.sin().to(device=device, dtype=dtype)


def apply_rotary(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    """x * cos + rotate_half(x) * sin on (batch, heads, seq, head_dim)."""
    # A named range shows the rotation in a trace; profile finds it by what it computes.
    with torch.profiler.record_function("rotary_embedding"):
        half = x.shape[-1] // 2
        rotated = torch.cat((-x[..., half:], x[..., :half]), dim=-1)
        return x * cos + rotated * sin


class Attention(nn.Module):
    def __init__(self, hidden: int, heads: int, kv_heads: int) -> None:
        super().__init__()
        self.heads, self.kv_heads, self.head_dim = heads, kv_heads, hidden // heads
        self.q_proj = nn.Linear(hidden, heads * self.head_dim, bias=False)
        self.k_proj = nn.Linear(hidden, kv_heads * self.head_dim, bias=False)
        self.v_proj = nn.Linear(hidden, kv_heads * self.head_dim, bias=False)
        self.o_proj = nn.Linear(heads * self.head_dim, hidden, bias=False)

    def forward(self, x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
        b, t, _ = x.shape
        q = self.q_proj(x).view(b, t, self.heads, self.head_dim).transpose(1, 2)
        k = self.k_proj(x).view(b, t, self.kv_heads, self.head_dim).transpose(1, 2)
        v = self.v_proj(x).view(b, t, self.kv_heads, self.head_dim).transpose(1, 2)
        q, k = apply_rotary(q, cos, sin), apply_rotary(k, cos, sin)
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True, enable_gqa=True)
        return self.o_proj(y.transpose(1, 2).reshape(b, t, -1))


class SwiGLUMLP(nn.Module):
    def __init__(self, hidden: int, intermediate: int) -> None:
        super().__init__()
        self.gate_proj = nn.Linear(hidden, intermediate, bias=False)
        self.up_proj = nn.Linear(hidden, intermediate, bias=False)
        self.down_proj = nn.Linear(intermediate, hidden, bias=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.down_proj(F.silu(self.gate_proj(x)) * self.up_proj(x))


class DecoderLayer(nn.Module):
    def __init__(self, hidden: int, heads: int, kv_heads: int, intermediate: int) -> None:
        super().__init__()
        self.input_layernorm = RMSNorm(hidden)
        self.self_attn = Attention(hidden, heads, kv_heads)
        self.post_attention_layernorm = RMSNorm(hidden)
        self.mlp = SwiGLUMLP(hidden, intermediate)

    def forward(self, x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
        x = x + self.self_attn(self.input_layernorm(x), cos, sin)
        return x + self.mlp(self.post_attention_layernorm(x))


class Model(nn.Module):
    def __init__(
        self,
        vocab: int = VOCAB,
        hidden: int = HIDDEN,
        heads: int = HEADS,
        kv_heads: int = KV_HEADS,
        intermediate: int = INTERMEDIATE,
        layers: int = LAYERS,
    ) -> None:
        super().__init__()
        torch.manual_seed(SEED)  # the same weights every run, so profiles and checks repeat
        self.head_dim = hidden // heads
        self.embed_tokens = nn.Embedding(vocab, hidden)
        self.layers = nn.ModuleList(
            DecoderLayer(hidden, heads, kv_heads, intermediate) for _ in range(layers)
        )
        self.norm = RMSNorm(hidden)
        self.lm_head = nn.Linear(hidden, vocab, bias=False)

    def forward(self, idx: torch.Tensor) -> torch.Tensor:
        x = self.embed_tokens(idx)
        cos, sin = rotary_tables(idx.shape[1], self.head_dim, x.dtype, x.device)
        for layer in self.layers:
            x = layer(x, cos, sin)
        return self.lm_head(self.norm(x))


def get_inputs() -> list[torch.Tensor]:
    gen = torch.Generator().manual_seed(SEED)
    return [torch.randint(0, VOCAB, (BATCH, SEQ), generator=gen)]


def get_init_inputs() -> list:
    return [VOCAB, HIDDEN, HEADS, KV_HEADS, INTERMEDIATE, LAYERS]
