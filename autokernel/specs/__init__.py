"""Registry of kernel specs, one per type: the single source of sizes, inputs and tolerances."""

from __future__ import annotations

from collections.abc import Mapping

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
from autokernel.specs.generic import GENERIC, generic_spec
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


# Every KERNEL_TYPE a kernel file may declare: the nine, and generic (a region of a model,
# whose spec comes from its description, never from the kernel file).
KERNEL_TYPES: tuple[str, ...] = (*SPECS, GENERIC)


class UnknownKernelType(ValueError):
    pass


def resolve(name: str, region: Mapping | None = None) -> KernelSpec:
    """The spec of a kernel type; a generic target's is built from its region description."""
    if name == GENERIC:
        if not region:
            raise UnknownKernelType(
                "a generic kernel is judged against its target's region: evaluate it through "
                "`autokernel run` with a plan from `autokernel profile`"
            )
        return generic_spec(region)
    return get_spec(name)


def get_spec(name: str) -> KernelSpec:
    try:
        return SPECS[name]
    except KeyError:
        known = ", ".join(SPECS)
        raise UnknownKernelType(f"unknown kernel type {name!r}; known types: {known}") from None


__all__ = [
    "DTYPES",
    "GENERIC",
    "KERNEL_TYPES",
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
    "resolve",
]
