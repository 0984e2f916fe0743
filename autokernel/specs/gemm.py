"""Specs of the compute-bound matrix types: matmul and the SwiGLU fused_mlp."""

from __future__ import annotations

import torch
import torch.nn.functional as F

from autokernel import reference
from autokernel.specs.base import Adversarial, KernelSpec, SizeSet, randn
from autokernel.specs.gemm_model import MATMUL_MODEL
from autokernel.specs.mlp_model import FUSED_MLP_MODEL


def _matmul_inputs(size, dtype, gen, device):
    # Activations of unit scale times weights of std 1/sqrt(K), as a linear layer initializes
    # them: outputs are O(1). With unit-scale B, outputs of size sqrt(K) put the fp32 rounding
    # of partial sums (seen: 4.9e-4 from cuBLAS at K=2048) above the 1e-4 fp32 tolerance.
    a = randn((size["M"], size["K"]), dtype, gen, device)
    b = randn((size["K"], size["N"]), dtype, gen, device, scale=size["K"] ** -0.5)
    return a, b


def _matmul_dynamic_range(size, dtype, gen, device):
    # Row scales of A from 2^-6 to 2^4 and column scales of B from 2^4 to 2^-6: outputs span
    # 2^-12..2^8 (times sqrt(K)), staying inside fp16, so a kernel that mixes rows shows it.
    m, n, k = size["M"], size["N"], size["K"]
    row = 2.0 ** torch.linspace(-6, 4, m, device=device).unsqueeze(1)
    col = 2.0 ** torch.linspace(4, -6, n, device=device).unsqueeze(0)
    a = (randn((m, k), torch.float32, gen, device) * row).to(dtype)
    b = (randn((k, n), torch.float32, gen, device) * col).to(dtype)
    return a, b


def _matmul_cancel(size, dtype, gen, device):
    # B's second half of rows negates its first half: every output is a sum of pairs that
    # nearly cancel, plus small noise, so partial sums are much larger than the result.
    m, n, k = size["M"], size["N"], size["K"]
    a_half = randn((m, k // 2), torch.float32, gen, device, scale=8.0)
    a = torch.cat((a_half, a_half + randn((m, k // 2), torch.float32, gen, device, scale=0.01)), 1)
    b_half = randn((k // 2, n), torch.float32, gen, device)
    b = torch.cat((b_half, -b_half), 0)
    return a.to(dtype), b.to(dtype)


def _matmul_flops(size):
    return 2.0 * size["M"] * size["N"] * size["K"]


def _matmul_bytes(size, dtype):
    m, n, k = size["M"], size["N"], size["K"]
    return (m * k + k * n + m * n) * dtype.itemsize


MATMUL = KernelSpec(
    name="matmul",
    arg_names=("A", "B"),
    dims=("M", "N", "K"),
    make_inputs=_matmul_inputs,
    flops=_matmul_flops,
    bytes_moved=_matmul_bytes,
    bound="compute",
    gpu=SizeSet(
        smoke={"M": 256, "N": 256, "K": 256},
        sweep=(
            {"M": 128, "N": 128, "K": 128},
            {"M": 256, "N": 512, "K": 1024},
            {"M": 1024, "N": 1024, "K": 1024},
            {"M": 2048, "N": 2048, "K": 2048},
            {"M": 1, "N": 4096, "K": 4096},
            {"M": 16, "N": 11008, "K": 4096},
            {"M": 8192, "N": 1024, "K": 4096},
            {"M": 512, "N": 14336, "K": 4096},
            {"M": 4096, "N": 4096, "K": 512},
        ),
        odd=(
            {"M": 1023, "N": 1537, "K": 4097},
            {"M": 4097, "N": 1023, "K": 1537},
            {"M": 77, "N": 3000, "K": 1000},
        ),
        bench=(
            {"M": 4096, "N": 4096, "K": 4096},
            {"M": 8192, "N": 8192, "K": 8192},
            {"M": 4096, "N": 14336, "K": 4096},
        ),
    ),
    cpu=SizeSet(
        smoke={"M": 32, "N": 32, "K": 32},
        sweep=(
            {"M": 16, "N": 16, "K": 16},
            {"M": 32, "N": 64, "K": 32},
            {"M": 64, "N": 32, "K": 128},
            {"M": 1, "N": 64, "K": 64},
            {"M": 64, "N": 64, "K": 64},
            {"M": 48, "N": 80, "K": 96},
            {"M": 128, "N": 64, "K": 32},
            {"M": 8, "N": 128, "K": 64},
        ),
        odd=(
            {"M": 33, "N": 65, "K": 17},
            {"M": 17, "N": 31, "K": 1023},
            {"M": 1, "N": 127, "K": 63},
        ),
        bench=({"M": 64, "N": 64, "K": 64},),
    ),
    adversarial=(
        Adversarial(
            "dynamic_range",
            _matmul_dynamic_range,
            "row/column scales from 2^-6 to 2^4",
            {"M": 1024, "N": 1024, "K": 1024},
            {"M": 32, "N": 48, "K": 64},
            # fp32 left out: near-zero outputs in rows scaled 2^4 carry rounding above 1e-4.
            dtypes=(torch.float16, torch.bfloat16),
        ),
        Adversarial(
            "cancellation",
            _matmul_cancel,
            "pairs of products that nearly cancel",
            {"M": 512, "N": 512, "K": 2048},
            {"M": 16, "N": 32, "K": 64},
            # fp32 left out: running sums ~256 against results ~0.3 exceed 1e-4 for any fp32
            # accumulation order, cuBLAS's included.
            dtypes=(torch.float16, torch.bfloat16),
        ),
    ),
    reference=reference.matmul,
    eager=torch.matmul,
    model=MATMUL_MODEL,
)


def _mlp_inputs(size, dtype, gen, device, x_scale: float = 1.0):
    m, h, i = size["M"], size["hidden"], size["inter"]
    x = randn((m, h), dtype, gen, device, scale=x_scale)
    # nn.Linear-style initialization (std 1/sqrt(fan_in)) keeps activations O(1), as in a model.
    w_gate = randn((i, h), dtype, gen, device, scale=h**-0.5)
    w_up = randn((i, h), dtype, gen, device, scale=h**-0.5)
    w_down = randn((h, i), dtype, gen, device, scale=i**-0.5)
    return x, w_gate, w_up, w_down


def _mlp_large_activations(size, dtype, gen, device):
    # Gate pre-activations of +-20 and beyond: silu's exp(-g) overflows for large negative g
    # unless computed as g * sigmoid(g) in fp32.
    return _mlp_inputs(size, dtype, gen, device, x_scale=8.0)


def _mlp_flops(size):
    return 6.0 * size["M"] * size["hidden"] * size["inter"]


def _mlp_bytes(size, dtype):
    m, h, i = size["M"], size["hidden"], size["inter"]
    return (2 * m * h + 3 * h * i) * dtype.itemsize


def _mlp_eager(x, w_gate, w_up, w_down):
    """What a LLaMA MLP runs: three cuBLAS matmuls and the SwiGLU elementwise in between."""
    return F.linear(F.silu(F.linear(x, w_gate)) * F.linear(x, w_up), w_down)


FUSED_MLP = KernelSpec(
    name="fused_mlp",
    arg_names=("x", "w_gate", "w_up", "w_down"),
    dims=("M", "hidden", "inter"),
    make_inputs=_mlp_inputs,
    flops=_mlp_flops,
    bytes_moved=_mlp_bytes,
    bound="compute",
    gpu=SizeSet(
        smoke={"M": 64, "hidden": 256, "inter": 512},
        sweep=(
            {"M": 1, "hidden": 4096, "inter": 14336},
            {"M": 16, "hidden": 1024, "inter": 2816},
            {"M": 64, "hidden": 512, "inter": 1376},
            {"M": 128, "hidden": 2048, "inter": 5632},
            {"M": 256, "hidden": 768, "inter": 3072},
            {"M": 512, "hidden": 4096, "inter": 11008},
            {"M": 2048, "hidden": 1024, "inter": 4096},
            {"M": 1024, "hidden": 4096, "inter": 14336},
        ),
        odd=(
            {"M": 1023, "hidden": 1024, "inter": 2752},
            {"M": 37, "hidden": 768, "inter": 2047},
            {"M": 4097, "hidden": 512, "inter": 1537},
        ),
        bench=(
            {"M": 4096, "hidden": 4096, "inter": 11008},
            {"M": 8192, "hidden": 4096, "inter": 14336},
        ),
    ),
    cpu=SizeSet(
        smoke={"M": 8, "hidden": 32, "inter": 64},
        sweep=(
            {"M": 1, "hidden": 32, "inter": 32},
            {"M": 4, "hidden": 32, "inter": 64},
            {"M": 16, "hidden": 64, "inter": 128},
            {"M": 8, "hidden": 16, "inter": 48},
            {"M": 32, "hidden": 32, "inter": 96},
            {"M": 3, "hidden": 64, "inter": 160},
            {"M": 16, "hidden": 128, "inter": 64},
            {"M": 64, "hidden": 16, "inter": 32},
        ),
        odd=(
            {"M": 17, "hidden": 48, "inter": 80},
            {"M": 5, "hidden": 33, "inter": 1023},
            {"M": 31, "hidden": 20, "inter": 37},
        ),
        bench=({"M": 32, "hidden": 64, "inter": 128},),
    ),
    adversarial=(
        Adversarial(
            "large_activations",
            _mlp_large_activations,
            "gate pre-activations far into silu's tails",
            {"M": 256, "hidden": 1024, "inter": 2816},
            {"M": 8, "hidden": 32, "inter": 64},
        ),
    ),
    reference=reference.fused_mlp,
    eager=_mlp_eager,
    model=FUSED_MLP_MODEL,
)
