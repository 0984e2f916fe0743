"""Specs of the row-wise memory-bound types: softmax, layernorm, rmsnorm, reduce."""

from __future__ import annotations

import torch
import torch.nn.functional as F

from autokernel import reference
from autokernel.specs.base import Adversarial, KernelSpec, Size, SizeSet, randn, uniform
from autokernel.specs.rowwise_model import (
    LAYERNORM_MODEL,
    REDUCE_MODEL,
    RMSNORM_MODEL,
    SOFTMAX_MODEL,
)

DIMS = ("batch", "rows", "cols")


def _shape(size: Size) -> tuple[int, ...]:
    """(rows, cols), or (batch, rows, cols) when a size has leading dims to exercise."""
    if "batch" in size:
        return (size["batch"], size["rows"], size["cols"])
    return (size["rows"], size["cols"])


def _n_rows(size: Size) -> int:
    return size.get("batch", 1) * size["rows"]


def _elementwise_bytes(size: Size, dtype: torch.dtype) -> float:
    """Read x once, write y once, plus the per-column parameters read once."""
    n = _n_rows(size) * size["cols"]
    return 2 * n * dtype.itemsize


# Sizes shared by the row-wise types. GPU: LLM-scale rows (vocabulary-wide, hidden-wide, narrow
# head-dim rows); CPU: small enough for the Triton interpreter, which runs programs one by one.
GPU_SWEEP: tuple[Size, ...] = (
    {"rows": 1, "cols": 128},
    {"rows": 7, "cols": 1000},
    {"rows": 1024, "cols": 1024},
    {"batch": 4, "rows": 256, "cols": 4096},
    {"rows": 2048, "cols": 8192},
    {"rows": 32768, "cols": 128},
    {"rows": 512, "cols": 32000},
    {"rows": 64, "cols": 50257},
    {"rows": 16, "cols": 131072},
)
GPU_ODD: tuple[Size, ...] = (
    {"rows": 1023, "cols": 1023},
    {"rows": 4097, "cols": 1537},
    {"rows": 3, "cols": 4097},
    {"rows": 257, "cols": 50257},
)
GPU_BENCH: tuple[Size, ...] = (
    {"rows": 4096, "cols": 50257},
    {"rows": 16384, "cols": 8192},
    {"rows": 262144, "cols": 128},
)
CPU_SWEEP: tuple[Size, ...] = (
    {"rows": 1, "cols": 8},
    {"rows": 4, "cols": 100},
    {"rows": 16, "cols": 256},
    {"batch": 2, "rows": 3, "cols": 64},
    {"rows": 32, "cols": 64},
    {"rows": 8, "cols": 1000},
    {"rows": 3, "cols": 2048},
    {"rows": 2, "cols": 4096},
)
CPU_ODD: tuple[Size, ...] = (
    {"rows": 5, "cols": 1023},
    {"rows": 3, "cols": 4097},
    {"rows": 7, "cols": 1537},
)
CPU_BENCH: tuple[Size, ...] = ({"rows": 64, "cols": 1024},)


def _sizes(gpu_bench: tuple[Size, ...] = GPU_BENCH) -> tuple[SizeSet, SizeSet]:
    gpu = SizeSet({"rows": 64, "cols": 1024}, GPU_SWEEP, GPU_ODD, gpu_bench)
    cpu = SizeSet({"rows": 4, "cols": 256}, CPU_SWEEP, CPU_ODD, CPU_BENCH)
    return gpu, cpu


# softmax ----------------------------------------------------------------------------------------


def _softmax_inputs(size, dtype, gen, device):
    return (randn(_shape(size), dtype, gen, device, scale=2.0),)


def _softmax_identical(size, dtype, gen, device):
    # Every element the same large value: exp without max-subtraction overflows to inf/inf.
    x = torch.full(_shape(size), 3.0e4, dtype=dtype, device=device)
    return (x,)


def _softmax_spread(size, dtype, gen, device):
    # Logits of both signs in the thousands: only a max-subtracted exp stays finite.
    x = randn(_shape(size), torch.float32, gen, device, scale=3.0e3).clamp(-6.0e4, 6.0e4)
    return (x.to(dtype),)


def _softmax_masked(size, dtype, gen, device):
    # Attention-style masking: most of each row is -inf, one finite entry per row at least.
    x = randn(_shape(size), torch.float32, gen, device, scale=4.0)
    keep = uniform(_shape(size), 0.0, 1.0, torch.float32, gen, device) < 0.1
    keep[..., 0] = True
    return (x.masked_fill(~keep, float("-inf")).to(dtype),)


_gpu, _cpu = _sizes()
SOFTMAX = KernelSpec(
    name="softmax",
    arg_names=("x",),
    dims=DIMS,
    make_inputs=_softmax_inputs,
    flops=lambda s: 5.0 * _n_rows(s) * s["cols"],
    bytes_moved=_elementwise_bytes,
    bound="memory",
    gpu=_gpu,
    cpu=_cpu,
    adversarial=(
        Adversarial(
            "large_identical",
            _softmax_identical,
            "rows of 3e4 everywhere: exp overflows unless the row max is subtracted",
            {"rows": 64, "cols": 50257},
            {"rows": 4, "cols": 1000},
        ),
        Adversarial(
            "large_spread",
            _softmax_spread,
            "logits of +-thousands",
            {"rows": 256, "cols": 32000},
            {"rows": 4, "cols": 777},
        ),
        Adversarial(
            "masked_rows",
            _softmax_masked,
            "90% of each row is -inf, as causal/padding masks make it",
            {"rows": 128, "cols": 8192},
            {"rows": 6, "cols": 300},
        ),
    ),
    reference=reference.softmax,
    eager=lambda x: torch.softmax(x, dim=-1),
    model=SOFTMAX_MODEL,
)


# layernorm --------------------------------------------------------------------------------------


def _norm_params(cols, dtype, gen, device, bias: bool):
    weight = (1.0 + randn((cols,), torch.float32, gen, device, scale=0.1)).to(dtype)
    if not bias:
        return (weight,)
    return weight, randn((cols,), dtype, gen, device, scale=0.1)


def _layernorm_inputs(size, dtype, gen, device):
    x = randn(_shape(size), dtype, gen, device)
    return (x, *_norm_params(size["cols"], dtype, gen, device, bias=True), 1e-5)


def _layernorm_offset(size, dtype, gen, device):
    # Mean 10, std 0.1: E[x^2] - E[x]^2 in fp32 cancels away most digits of the variance.
    x = (10.0 + randn(_shape(size), torch.float32, gen, device, scale=0.1)).to(dtype)
    return (x, *_norm_params(size["cols"], dtype, gen, device, bias=True), 1e-5)


def _layernorm_constant(size, dtype, gen, device):
    # Constant rows: variance exactly zero, the output is bias alone (eps keeps it finite).
    x = torch.full(_shape(size), 2.5, dtype=dtype, device=device)
    return (x, *_norm_params(size["cols"], dtype, gen, device, bias=True), 1e-5)


def _layernorm_eager(x, weight, bias, eps):
    return F.layer_norm(x, (x.shape[-1],), weight, bias, eps)


LAYERNORM = KernelSpec(
    name="layernorm",
    arg_names=("x", "weight", "bias", "eps"),
    dims=DIMS,
    make_inputs=_layernorm_inputs,
    flops=lambda s: 8.0 * _n_rows(s) * s["cols"],
    bytes_moved=lambda s, d: _elementwise_bytes(s, d) + 2 * s["cols"] * d.itemsize,
    bound="memory",
    gpu=_gpu,
    cpu=_cpu,
    adversarial=(
        Adversarial(
            "large_mean_small_var",
            _layernorm_offset,
            "mean 10, std 0.1: one-pass E[x^2]-E[x]^2 loses the variance",
            {"rows": 1024, "cols": 4096},
            {"rows": 4, "cols": 1024},
        ),
        Adversarial(
            "constant_rows",
            _layernorm_constant,
            "zero variance: the output must be the bias, finite",
            {"rows": 256, "cols": 8192},
            {"rows": 3, "cols": 512},
        ),
    ),
    reference=reference.layernorm,
    eager=_layernorm_eager,
    model=LAYERNORM_MODEL,
)


# rmsnorm ----------------------------------------------------------------------------------------


def _rmsnorm_inputs(size, dtype, gen, device):
    x = randn(_shape(size), dtype, gen, device)
    return (x, *_norm_params(size["cols"], dtype, gen, device, bias=False), 1e-6)


def _rmsnorm_tiny(size, dtype, gen, device):
    # mean(x^2) = 1e-6 = eps: a kernel that drops or misplaces eps is off by sqrt(2).
    x = randn(_shape(size), dtype, gen, device, scale=1e-3)
    return (x, *_norm_params(size["cols"], dtype, gen, device, bias=False), 1e-6)


def _rmsnorm_large(size, dtype, gen, device):
    # |x| in the hundreds: x^2 overflows fp16 unless squared after upcasting.
    x = randn(_shape(size), dtype, gen, device, scale=300.0)
    return (x, *_norm_params(size["cols"], dtype, gen, device, bias=False), 1e-6)


def _rmsnorm_eager(x, weight, eps):
    return F.rms_norm(x, (x.shape[-1],), weight, eps)


RMSNORM = KernelSpec(
    name="rmsnorm",
    arg_names=("x", "weight", "eps"),
    dims=DIMS,
    make_inputs=_rmsnorm_inputs,
    flops=lambda s: 4.0 * _n_rows(s) * s["cols"],
    bytes_moved=lambda s, d: _elementwise_bytes(s, d) + s["cols"] * d.itemsize,
    bound="memory",
    gpu=_gpu,
    cpu=_cpu,
    adversarial=(
        Adversarial(
            "near_zero_rms",
            _rmsnorm_tiny,
            "mean(x^2) equal to eps",
            {"rows": 1024, "cols": 4096},
            {"rows": 4, "cols": 1024},
        ),
        Adversarial(
            "large_values",
            _rmsnorm_large,
            "|x| ~ 300: x^2 overflows fp16",
            {"rows": 1024, "cols": 8192},
            {"rows": 4, "cols": 512},
        ),
    ),
    reference=reference.rmsnorm,
    eager=_rmsnorm_eager,
    model=RMSNORM_MODEL,
)


# reduce -----------------------------------------------------------------------------------------


def _reduce_inputs(size, dtype, gen, device):
    return (randn(_shape(size), dtype, gen, device),)


def _reduce_cancel(size, dtype, gen, device):
    # Alternating +-1000 plus unit noise: the sum is O(sqrt(n)) but partial sums are O(1000),
    # where an fp16 or bf16 accumulator has lost the noise.
    shape = _shape(size)
    sign = torch.ones(shape, device=device)
    sign[..., 1::2] = -1.0
    noise = randn(shape, torch.float32, gen, device)
    return ((1000.0 * sign + noise).to(dtype),)


def _reduce_positive(size, dtype, gen, device):
    # All positive: totals in the tens of thousands, where fp16 accumulation stalls.
    return (uniform(_shape(size), 1.0, 4.0, dtype, gen, device),)


REDUCE = KernelSpec(
    name="reduce",
    arg_names=("x",),
    dims=DIMS,
    make_inputs=_reduce_inputs,
    flops=lambda s: 1.0 * _n_rows(s) * s["cols"],
    bytes_moved=lambda s, d: _n_rows(s) * (s["cols"] + 1) * d.itemsize,
    bound="memory",
    gpu=_gpu,
    cpu=_cpu,
    adversarial=(
        Adversarial(
            "cancellation",
            _reduce_cancel,
            "+-1000 alternating: needs an fp32 accumulator",
            {"rows": 1024, "cols": 8192},
            {"rows": 4, "cols": 2048},
            dtypes=(torch.float16, torch.bfloat16),
        ),
        Adversarial(
            "positive_large_total",
            _reduce_positive,
            "totals ~ 2.5 x cols",
            {"rows": 256, "cols": 16384},
            {"rows": 4, "cols": 4096},
        ),
    ),
    reference=reference.reduce,
    eager=lambda x: x.sum(dim=-1),
    model=REDUCE_MODEL,
)
