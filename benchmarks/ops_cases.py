"""The 30 ops of benchmarks/ops.py: ops no kernel type computes, at LLM-scale sizes.

Each case is a region as a model calls it (a function over tensors) and its inputs' shapes:
activations and elementwise chains, norms and reductions over any dim, softmax variants,
rotary functions. Sizes: 8192 tokens of a 4096-wide model (11008 / 16384 wide MLPs), 32k
vocabularies, 32-head attention at 4096 positions. `small` shrinks every shape for a CPU run.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

import torch
import torch.nn.functional as F

T, H, MLP, V = 8192, 4096, 11008, 32000  # tokens, hidden, MLP width, vocabulary


@dataclass(frozen=True)
class OpCase:
    name: str
    fn: Callable[..., object]
    shapes: tuple[tuple[int, ...], ...]
    what: str
    positive: tuple[int, ...] = ()  # inputs drawn >= 0 (a sqrt's or log's argument)


def _rotate_half(x):
    x1, x2 = x[..., : x.shape[-1] // 2], x[..., x.shape[-1] // 2 :]
    return torch.cat((-x2, x1), dim=-1)


def _hf_rotary(q, k, cos, sin):
    cos, sin = cos.unsqueeze(1), sin.unsqueeze(1)
    return q * cos + _rotate_half(q) * sin, k * cos + _rotate_half(k) * sin


def _new_gelu(x):
    return 0.5 * x * (1.0 + torch.tanh(math.sqrt(2.0 / math.pi) * (x + 0.044715 * x.pow(3.0))))


def _rms_fp32(x, w):
    xf = x.float()
    return (xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + 1e-6) * w.float()).to(x.dtype)


def _add_rms(x, r, w):
    return _rms_fp32(x + r, w)


def _swiglu_split(x):
    a, b = x.chunk(2, dim=-1)
    return F.silu(a) * b


CASES: tuple[OpCase, ...] = (
    OpCase("gelu_tanh", lambda x: F.gelu(x, approximate="tanh"), ((T, 4 * H),), "GPT-2 MLP"),
    OpCase("gelu_erf", F.gelu, ((T, 4 * H),), "BERT MLP"),
    OpCase("new_gelu_written", _new_gelu, ((T, 4 * H),), "HF NewGELUActivation"),
    OpCase("quick_gelu", lambda x: x * torch.sigmoid(1.702 * x), ((T, 4 * H),), "CLIP"),
    OpCase("silu", F.silu, ((T, MLP),), "SwiGLU gate"),
    OpCase("silu_mul", lambda a, b: F.silu(a) * b, ((T, MLP), (T, MLP)), "SwiGLU gating"),
    OpCase("swiglu_chunk", _swiglu_split, ((T, 2 * MLP),), "fused gate/up output"),
    OpCase("relu_sq", lambda x: torch.relu(x).square(), ((T, 4 * H),), "Primer"),
    OpCase("sigmoid", torch.sigmoid, ((T, 4 * H),), "gates"),
    OpCase("tanh", torch.tanh, ((T, 4 * H),), "soft-capping"),
    OpCase("softcap", lambda x: 30.0 * torch.tanh(x / 30.0), ((T // 2, V),), "Gemma logits"),
    OpCase("residual_add", lambda x, r: x + r, ((T, H), (T, H)), "residual stream"),
    OpCase("scaled_residual", lambda x, r: x * 0.5 + r * 0.7, ((T, H), (T, H)), "DeepNorm"),
    OpCase(
        "bias_gelu",
        lambda x, b: F.gelu(x + b, approximate="tanh"),
        ((T, 4 * H), (4 * H,)),
        "GPT-2 c_fc bias + GELU",
    ),
    OpCase(
        "add_layernorm",
        lambda x, r, w, b: F.layer_norm(x + r, x.shape[-1:], w, b),
        ((T, H), (T, H), (H,), (H,)),
        "residual + post-norm",
    ),
    OpCase("add_rmsnorm", _add_rms, ((T, H), (T, H), (H,)), "residual + pre-norm"),
    OpCase("rmsnorm_fp32_stats", _rms_fp32, ((T, H), (H,)), "LLaMA RMSNorm written out"),
    OpCase(
        "rmsnorm_channels",
        lambda x: x / torch.sqrt(torch.mean(x**2, dim=1, keepdim=True) + 1e-6),
        ((32, 256, 64, 64),),
        "channel RMSNorm, 4-D",
    ),
    OpCase(
        "layernorm_noaffine", lambda x: F.layer_norm(x, x.shape[-1:]), ((T, H),), "no weight/bias"
    ),
    OpCase("l2_normalize", lambda x: F.normalize(x, dim=-1), ((T, H),), "embeddings"),
    OpCase("log_softmax", lambda x: torch.log_softmax(x, dim=-1), ((T // 2, V),), "LM head"),
    OpCase(
        "softmax_dim1",
        lambda x: torch.softmax(x, dim=1),
        ((32, 4096, 128),),
        "softmax over a middle dim",
    ),
    OpCase(
        "scaled_masked_softmax",
        lambda x, m: torch.softmax(x * 0.125 + m, dim=-1),
        ((32, 1024, 1024), (1024, 1024)),
        "eager attention scores",
    ),
    OpCase("logsumexp", lambda x: torch.logsumexp(x, dim=-1), ((T // 2, V),), "loss / routing"),
    OpCase("sum_middle", lambda x: torch.sum(x, dim=1), ((64, 4096, 512),), "pooling over seq"),
    OpCase("mean_last", lambda x: x.mean(-1), ((T, H),), "statistics"),
    OpCase("amax_last", lambda x: x.amax(-1), ((T, H),), "fp8 scales"),
    OpCase("var_last", lambda x: torch.var(x, dim=-1), ((T, H),), "statistics"),
    OpCase(
        "hf_rotary",
        _hf_rotary,
        ((4, 32, 4096, 128), (4, 8, 4096, 128), (4, 4096, 128), (4, 4096, 128)),
        "transformers apply_rotary_pos_emb",
    ),
    OpCase(
        "rotary_half",
        lambda x, c, s: x * c + _rotate_half(x) * s,
        ((4, 32, 4096, 128), (4096, 128), (4096, 128)),
        "rotate_half rotary",
    ),
)
assert len(CASES) == 30 and len({c.name for c in CASES}) == 30


SMALL_DIM = 16  # every dim of a CPU-sized case: equal dims stay equal, so shapes still fit


def small(shape: tuple[int, ...]) -> tuple[int, ...]:
    """A CPU-sized shape: every dim capped at SMALL_DIM, the rank kept."""
    return tuple(min(n, SMALL_DIM) for n in shape)
