"""Registry of kernel specs, one per type: the single source of sizes, inputs and tolerances."""

from __future__ import annotations

from autokernel.specs.attention import FLASH_ATTENTION
from autokernel.specs.base import (
    DTYPES,
    TOLERANCES,
    Adversarial,
    KernelSpec,
    Size,
    SizeSet,
    dtype_name,
    parse_dtype,
)
from autokernel.specs.cross_entropy import CROSS_ENTROPY
from autokernel.specs.gemm import FUSED_MLP, MATMUL
from autokernel.specs.rotary import ROTARY_EMBEDDING
from autokernel.specs.rowwise import LAYERNORM, REDUCE, RMSNORM, SOFTMAX

SPECS: dict[str, KernelSpec] = {
    s.name: s
    for s in (
        MATMUL,
        FLASH_ATTENTION,
        FUSED_MLP,
        SOFTMAX,
        LAYERNORM,
        RMSNORM,
        CROSS_ENTROPY,
        ROTARY_EMBEDDING,
        REDUCE,
    )
}


class UnknownKernelType(ValueError):
    pass


def get_spec(name: str) -> KernelSpec:
    try:
        return SPECS[name]
    except KeyError:
        known = ", ".join(SPECS)
        raise UnknownKernelType(f"unknown kernel type {name!r}; known types: {known}") from None


__all__ = [
    "DTYPES",
    "SPECS",
    "TOLERANCES",
    "Adversarial",
    "KernelSpec",
    "Size",
    "SizeSet",
    "UnknownKernelType",
    "dtype_name",
    "get_spec",
    "parse_dtype",
]
