"""What the verify tests share: a tiny LLaMA-style model that uses all nine kernel types, its
inputs, and workspaces holding the starters (or a broken RMSNorm) as a finished run leaves them."""

from __future__ import annotations

from pathlib import Path

import torch
import torch.nn.functional as F
from torch import nn

from autokernel.specs import SPECS

ROOT = Path(__file__).parents[1]
KERNELS = ROOT / "kernels"
LLAMA_EXAMPLE = ROOT / "examples" / "llama_style.py"


class RMSNorm(nn.Module):
    def __init__(self, dim: int, eps: float = 1e-6) -> None:
        super().__init__()
        self.weight = nn.Parameter(1 + 0.1 * torch.randn(dim))
        self.eps = eps

    def forward(self, x):
        xf = x.float()
        return (xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + self.eps) * self.weight).to(
            x.dtype
        )


def apply_rotary(x, cos, sin):
    half = x.shape[-1] // 2
    return x * cos + torch.cat((-x[..., half:], x[..., :half]), dim=-1) * sin


class MLP(nn.Module):
    def __init__(self, d: int, i: int) -> None:
        super().__init__()
        self.gate_proj = nn.Linear(d, i, bias=False)
        self.up_proj = nn.Linear(d, i, bias=False)
        self.down_proj = nn.Linear(i, d, bias=False)

    def forward(self, x):
        return self.down_proj(F.silu(self.gate_proj(x)) * self.up_proj(x))


class Block(nn.Module):
    def __init__(self, d: int, h: int, kvh: int, i: int) -> None:
        super().__init__()
        self.h, self.kvh, self.hd = h, kvh, d // h
        self.attn_norm, self.mlp_norm = RMSNorm(d), RMSNorm(d)
        self.q_proj = nn.Linear(d, d, bias=False)
        self.k_proj = nn.Linear(d, kvh * self.hd, bias=False)
        self.v_proj = nn.Linear(d, kvh * self.hd, bias=False)
        self.o_proj = nn.Linear(d, d, bias=False)
        self.mlp = MLP(d, i)

    def forward(self, x, cos, sin):
        b, s, d = x.shape
        hx = self.attn_norm(x)
        q = self.q_proj(hx).view(b, s, self.h, self.hd).transpose(1, 2)
        k = self.k_proj(hx).view(b, s, self.kvh, self.hd).transpose(1, 2)
        v = self.v_proj(hx).view(b, s, self.kvh, self.hd).transpose(1, 2)
        q, k = apply_rotary(q, cos, sin), apply_rotary(k, cos, sin)
        a = F.scaled_dot_product_attention(q, k, v, is_causal=True, enable_gqa=True)
        x = x + self.o_proj(a.transpose(1, 2).reshape(b, s, d))
        return x + self.mlp(self.mlp_norm(x))


class Tiny(nn.Module):
    """LLaMA blocks, then a LayerNorm head, softmax, a last-dim torch.sum and the loss."""

    def __init__(self, vocab=64, d=32, h=4, kvh=2, i=64, layers=2, seq=8) -> None:
        super().__init__()
        torch.manual_seed(0)
        self.embed = nn.Embedding(vocab, d)
        self.blocks = nn.ModuleList(Block(d, h, kvh, i) for _ in range(layers))
        self.norm = nn.LayerNorm(d)
        self.head = nn.Linear(d, vocab)
        inv = 1.0 / 10000 ** (torch.arange(0, d // h, 2).float() / (d // h))
        f = torch.outer(torch.arange(seq).float(), inv)
        self.register_buffer("cos", torch.cat((f, f), -1).cos(), persistent=False)
        self.register_buffer("sin", torch.cat((f, f), -1).sin(), persistent=False)

    def forward(self, ids, targets):
        x, s = self.embed(ids), ids.shape[1]
        for blk in self.blocks:
            x = blk(x, self.cos[:s], self.sin[:s])
        logits = self.head(self.norm(x))
        probs = F.softmax(logits, dim=-1)
        loss = F.cross_entropy(logits.reshape(-1, logits.shape[-1]), targets.reshape(-1))
        return probs, torch.sum(probs * logits, dim=-1), loss


def tiny_inputs() -> list[torch.Tensor]:
    gen = torch.Generator().manual_seed(1)
    return [
        torch.randint(0, 64, (2, 8), generator=gen),
        torch.randint(0, 64, (2, 8), generator=gen),
    ]


def workspace_with(tmp_path: Path, sources: dict[str, str]) -> Path:
    """A workspace holding optimized/<name>.py files, as a finished run leaves them."""
    opt = tmp_path / "ws" / "optimized"
    opt.mkdir(parents=True)
    for name, text in sources.items():
        (opt / f"{name}.py").write_text(text)
    return opt.parent


def starters(*names: str) -> dict[str, str]:
    return {n: (KERNELS / f"{n}.py").read_text() for n in names or SPECS}


def broken_rmsnorm() -> str:
    text = (KERNELS / "rmsnorm.py").read_text()
    good = "y = x * rstd[:, None] * w"  # the single path and both chunked branches
    assert text.count(good) == 3
    return text.replace(good, "y = 1.05 * x * rstd[:, None] * w")
