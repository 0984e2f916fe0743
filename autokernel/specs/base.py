"""The spec of a kernel type: what the harness, the tuner and the profiler know about it.

A spec is data: argument names, how to build inputs for a size, which sizes each stage uses on
a GPU and on the CPU interpreter, adversarial inputs, FLOP and byte counts, tolerances, and its
model side (how a model's calls and modules become the type). Nothing here comes from kernel.py.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Literal

import torch

from autokernel.specs.model_side import ModelSide

Size = Mapping[str, int]
Inputs = tuple  # positional arguments of kernel_fn: tensors and python scalars
MakeInputs = Callable[[Size, torch.dtype, torch.Generator, torch.device], Inputs]

DTYPES: tuple[torch.dtype, ...] = (torch.float16, torch.bfloat16, torch.float32)
DTYPE_NAMES: dict[str, torch.dtype] = {
    "float16": torch.float16,
    "fp16": torch.float16,
    "bfloat16": torch.bfloat16,
    "bf16": torch.bfloat16,
    "float32": torch.float32,
    "fp32": torch.float32,
}

# (atol, rtol) against a float64 reference built from the same low-precision inputs. The rtol
# matches the atol: large outputs are judged relative to their size, small ones absolutely.
TOLERANCES: dict[torch.dtype, tuple[float, float]] = {
    torch.float16: (1e-2, 1e-2),
    torch.bfloat16: (2e-2, 2e-2),
    torch.float32: (1e-4, 1e-4),
}


def dtype_name(dtype: torch.dtype) -> str:
    return str(dtype).removeprefix("torch.")


def parse_dtype(name: str) -> torch.dtype:
    try:
        return DTYPE_NAMES[name.lower()]
    except KeyError:
        raise ValueError(f"unknown dtype {name!r}; use one of float16, bfloat16, float32") from None


def output_dtype(name: str) -> torch.dtype:
    """Any torch dtype by its dtype_name: a generic region's output may be int64 or bool (an
    integer cumsum, an argmax), and the judge names it so to the candidate's process. Users'
    flags go through parse_dtype, which takes the benchmark dtypes only."""
    value = getattr(torch, name, None)
    if not isinstance(value, torch.dtype):
        raise ValueError(f"unknown dtype {name!r}")
    return value


@dataclass(frozen=True)
class Adversarial:
    """A named input that breaks naive kernels (overflow, cancellation, extreme indices)."""

    name: str
    make: MakeInputs
    why: str
    gpu_size: Size
    cpu_size: Size
    # Where a case only stresses low-precision accumulation, fp32 is left out: its tolerance
    # (1e-4 against float64) is tighter than any fp32 accumulation of such inputs achieves.
    dtypes: tuple[torch.dtype, ...] = DTYPES

    def size(self, on_gpu: bool) -> Size:
        return self.gpu_size if on_gpu else self.cpu_size


@dataclass(frozen=True)
class SizeSet:
    """The sizes one stage uses on one kind of device."""

    smoke: Size
    sweep: tuple[Size, ...]
    odd: tuple[Size, ...]  # non-power-of-two sizes: masks and tails
    bench: tuple[Size, ...]


@dataclass(frozen=True)
class KernelSpec:
    name: str
    arg_names: tuple[str, ...]
    dims: tuple[str, ...]  # names of the size keys, in the order shape labels print them
    make_inputs: MakeInputs
    flops: Callable[[Size], float]
    bytes_moved: Callable[[Size, torch.dtype], float]  # each input read once, output written once
    bound: Literal["memory", "compute"]
    gpu: SizeSet
    cpu: SizeSet
    adversarial: tuple[Adversarial, ...]
    reference: Callable  # the oracle in reference.py
    eager: Callable  # the fastest plain-PyTorch way to compute it: the speed baseline
    out_dtype: Callable[[torch.dtype], torch.dtype] = field(default=lambda d: d)
    bench_dtype_gpu: torch.dtype = torch.bfloat16
    bench_dtype_cpu: torch.dtype = torch.float32
    dtypes: tuple[torch.dtype, ...] = DTYPES  # what the stages sweep
    variant: str = ""  # a generic target's region digest: one type, many different ops
    # How profile and verify find the type in a model (specs/<family>_model.py); None for a
    # generic target, whose region says it instead.
    model: ModelSide | None = None
    # Size keys that are not dimensions but choose what is computed (attention's causal flag and
    # mask form), with the values each may take: `run --shape` accepts them as name=value.
    options: dict[str, tuple[int, ...]] = field(default_factory=dict)

    @property
    def cache_name(self) -> str:
        """The name cached figures are filed under (baselines): the type, and for a generic
        target which region it is."""
        return f"{self.name}-{self.variant}" if self.variant else self.name

    def sizes(self, on_gpu: bool) -> SizeSet:
        return self.gpu if on_gpu else self.cpu

    def label(self, size: Size) -> str:
        """'4096x50257'-style label in the order of ``dims`` (optional dims left out)."""
        label = "x".join(str(size[d]) for d in self.dims if d in size)
        extra = [f"{k}={v}" for k, v in size.items() if k not in self.dims]
        return " ".join([label, *extra])

    def tolerance(self, dtype: torch.dtype) -> tuple[float, float]:
        return TOLERANCES[dtype]


def randn(
    shape: tuple[int, ...],
    dtype: torch.dtype,
    gen: torch.Generator,
    device: torch.device,
    scale: float = 1.0,
) -> torch.Tensor:
    """Normal samples drawn in fp32 on the generator's device (no host round trip), then cast."""
    t = torch.randn(shape, generator=gen, dtype=torch.float32, device=gen.device)
    return (t * scale).to(device=device, dtype=dtype)


def uniform(
    shape: tuple[int, ...],
    lo: float,
    hi: float,
    dtype: torch.dtype,
    gen: torch.Generator,
    device: torch.device,
) -> torch.Tensor:
    t = torch.rand(shape, generator=gen, dtype=torch.float32, device=gen.device)
    return (t * (hi - lo) + lo).to(device=device, dtype=dtype)


def randint(
    shape: tuple[int, ...], hi: int, gen: torch.Generator, device: torch.device
) -> torch.Tensor:
    return torch.randint(0, hi, shape, generator=gen, device=gen.device).to(device)
