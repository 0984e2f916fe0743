"""Spec of rotary_embedding: LLaMA-style RoPE applied to (batch, heads, seq, head_dim)."""

from __future__ import annotations

import torch

from autokernel import reference
from autokernel.specs.base import Adversarial, KernelSpec, SizeSet, randn
from autokernel.specs.rotary_model import ROTARY_EMBEDDING_MODEL

DIMS = ("batch", "heads", "seq", "head_dim")
THETA = 10000.0


def _cos_sin(seq, head_dim, dtype, device, start: int = 0):
    """cos/sin tables as LLaMA builds them (angles in fp64 here, then cast to the model dtype)."""
    inv_freq = 1.0 / THETA ** (torch.arange(0, head_dim, 2, dtype=torch.float64) / head_dim)
    pos = torch.arange(start, start + seq, dtype=torch.float64)
    freqs = torch.outer(pos, inv_freq)
    emb = torch.cat((freqs, freqs), dim=-1)
    return emb.cos().to(device=device, dtype=dtype), emb.sin().to(device=device, dtype=dtype)


def _shape(size):
    return (size["batch"], size["heads"], size["seq"], size["head_dim"])


def _inputs(size, dtype, gen, device):
    x = randn(_shape(size), dtype, gen, device)
    return (x, *_cos_sin(size["seq"], size["head_dim"], dtype, device))


def _far_positions(size, dtype, gen, device):
    # Positions near 500k (long-context models): angles wrap many times; tables must be used as
    # given, not recomputed from the sequence index.
    x = randn(_shape(size), dtype, gen, device)
    return (x, *_cos_sin(size["seq"], size["head_dim"], dtype, device, start=500_000))


def _large_values(size, dtype, gen, device):
    # fp16/bf16 only: their products are exact in fp32, so only a kernel that computes in the
    # input dtype loses digits. In fp32 itself the cancellation is beyond any fp32 kernel.
    x = randn(_shape(size), dtype, gen, device, scale=3.0e3)
    return (x, *_cos_sin(size["seq"], size["head_dim"], dtype, device))


def _eager(x, cos, sin):
    """What HF LLaMA runs: the rotation in the input dtype, four elementwise kernels."""
    half = x.shape[-1] // 2
    return x * cos + torch.cat((-x[..., half:], x[..., :half]), dim=-1) * sin


def _bytes(size, dtype):
    n = size["batch"] * size["heads"] * size["seq"] * size["head_dim"]
    return (2 * n + 2 * size["seq"] * size["head_dim"]) * dtype.itemsize


ROTARY_EMBEDDING = KernelSpec(
    name="rotary_embedding",
    arg_names=("x", "cos", "sin"),
    dims=DIMS,
    make_inputs=_inputs,
    flops=lambda s: 3.0 * s["batch"] * s["heads"] * s["seq"] * s["head_dim"],
    bytes_moved=_bytes,
    bound="memory",
    gpu=SizeSet(
        smoke={"batch": 1, "heads": 4, "seq": 64, "head_dim": 64},
        sweep=(
            {"batch": 1, "heads": 1, "seq": 1, "head_dim": 128},
            {"batch": 4, "heads": 8, "seq": 512, "head_dim": 64},
            {"batch": 2, "heads": 16, "seq": 1024, "head_dim": 128},
            {"batch": 8, "heads": 32, "seq": 128, "head_dim": 128},
            {"batch": 1, "heads": 32, "seq": 2048, "head_dim": 128},
            {"batch": 1, "heads": 40, "seq": 4096, "head_dim": 128},
            {"batch": 16, "heads": 12, "seq": 256, "head_dim": 64},
            {"batch": 1, "heads": 8, "seq": 8192, "head_dim": 128},
            {"batch": 2, "heads": 4, "seq": 300, "head_dim": 32},
        ),
        odd=(
            {"batch": 1, "heads": 3, "seq": 1023, "head_dim": 128},
            {"batch": 2, "heads": 5, "seq": 1537, "head_dim": 64},
            {"batch": 1, "heads": 7, "seq": 4097, "head_dim": 80},
        ),
        bench=(
            {"batch": 4, "heads": 32, "seq": 4096, "head_dim": 128},
            {"batch": 1, "heads": 32, "seq": 16384, "head_dim": 128},
        ),
    ),
    cpu=SizeSet(
        smoke={"batch": 1, "heads": 2, "seq": 8, "head_dim": 16},
        sweep=(
            {"batch": 1, "heads": 1, "seq": 1, "head_dim": 16},
            {"batch": 1, "heads": 2, "seq": 16, "head_dim": 32},
            {"batch": 2, "heads": 2, "seq": 8, "head_dim": 64},
            {"batch": 1, "heads": 4, "seq": 32, "head_dim": 16},
            {"batch": 2, "heads": 1, "seq": 64, "head_dim": 32},
            {"batch": 1, "heads": 2, "seq": 128, "head_dim": 128},
            {"batch": 3, "heads": 2, "seq": 12, "head_dim": 64},
            {"batch": 1, "heads": 1, "seq": 256, "head_dim": 32},
        ),
        odd=(
            {"batch": 1, "heads": 3, "seq": 17, "head_dim": 80},
            {"batch": 1, "heads": 1, "seq": 1023, "head_dim": 16},
            {"batch": 2, "heads": 3, "seq": 37, "head_dim": 96},
        ),
        bench=({"batch": 1, "heads": 4, "seq": 128, "head_dim": 64},),
    ),
    adversarial=(
        Adversarial(
            "far_positions",
            _far_positions,
            "positions from 500000: use the cos/sin tables as given",
            {"batch": 1, "heads": 8, "seq": 1024, "head_dim": 128},
            {"batch": 1, "heads": 2, "seq": 16, "head_dim": 32},
        ),
        Adversarial(
            "large_values",
            _large_values,
            "|x| in the thousands: cancellation between x*cos and rotate_half(x)*sin",
            {"batch": 2, "heads": 8, "seq": 512, "head_dim": 128},
            {"batch": 1, "heads": 2, "seq": 8, "head_dim": 64},
            dtypes=(torch.float16, torch.bfloat16),
        ),
    ),
    reference=reference.rotary_embedding,
    eager=_eager,
    model=ROTARY_EMBEDDING_MODEL,
)
