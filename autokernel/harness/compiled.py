"""What a candidate's compiled Triton kernels are: registers, spills, shared memory, occupancy
and how wide their global loads are, read after they ran.

Why: "slower than expected" has a few usual causes that the compiled kernel shows directly.
Spilled registers (the H200 sweeps measured spilling configs 7-35x slower than their
neighbours), too few resident warps, or 2-byte loads where 16-byte vectors were meant (odd row
widths held 4096x50257 rows at 22-60 % of copy). The tuner prunes on spills; the benchmark
prints all of it next to our kernels' figures.

Triton keeps each compiled kernel in its JIT function's per-device cache, with what the driver
reported at load time. That cache is internal and its layout has changed between releases, so
everything here is read defensively. When it cannot be read (the interpreter, or another
Triton), the answer is None ("unknown"), never 0.
"""

from __future__ import annotations

import re
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from types import ModuleType
from typing import Any

# sm_90 (H100/H200) limits, used where torch does not report them
SM90 = {"warps": 64, "blocks": 32, "regs": 65536, "smem": 233472}
REG_UNIT = 256  # registers are allocated per warp in units of 256
SMEM_RESERVED = 1024  # bytes the driver reserves per block on sm_8x/sm_90


def _jit_functions(module: ModuleType) -> Iterator[Any]:
    for value in vars(module).values():
        if hasattr(value, "device_caches") and hasattr(value, "fn"):  # triton JITFunction
            yield value


def _compiled(fn: Any) -> Iterator[Any]:
    caches = getattr(fn, "device_caches", None)
    if not isinstance(caches, dict):
        return
    for entry in caches.values():
        cache = entry[0] if isinstance(entry, tuple) and entry else entry
        if isinstance(cache, dict):
            yield from cache.values()


def forget(module: ModuleType) -> None:
    """Drop the module's in-memory compiled kernels, so that what a call leaves behind is what it
    used (Triton reloads them from its disk cache, in milliseconds)."""
    try:
        for fn in _jit_functions(module):
            caches = getattr(fn, "device_caches", None)
            if isinstance(caches, dict):
                caches.clear()
    except Exception:  # an internal layout we do not know: the facts may then be cumulative
        pass


def spilled_registers(module: ModuleType) -> int | None:
    """The most 32-bit registers per thread that any compiled kernel in `module` spilled (the
    driver's local memory size / 4, as Triton reports it), or None when no compiled kernel
    with a known figure is found."""
    worst: int | None = None
    try:
        for fn in _jit_functions(module):
            for kernel in _compiled(fn):
                n = getattr(kernel, "n_spills", None)
                if isinstance(n, int) and not isinstance(n, bool):
                    worst = max(worst or 0, n)
        for n in _cuda_local_words(module):
            worst = max(worst or 0, n)
    except Exception:  # an internal layout we do not know: unknown, not "no spills"
        return None
    return worst


def _cuda_local_words(module: ModuleType) -> list[int]:
    """Per BACKEND = "cuda" kernel loaded by the module: its local memory per thread in 32-bit
    words (spilled registers and arrays the compiler could not keep in registers)."""
    builder = sys.modules.get("autokernel.cuda_driver")
    if builder is None:
        return []
    out = []
    for value in list(vars(module).values()):
        if isinstance(value, builder.CudaModule):
            out += [getattr(value, name).local_bytes // 4 for name in value.kernel_names()]
    return out


@dataclass
class KernelFacts:
    name: str
    regs: int
    spills: int
    shared: int
    num_warps: int
    resident_warps: int  # per SM, from the limits above
    vector_loads: int  # 16-byte global load instructions in the PTX (static, not executed)
    loads: int  # all global load instructions in the PTX

    def describe(self, max_warps: int = SM90["warps"]) -> str:
        return (
            f"{self.name}: {self.regs} regs, {self.spills} spilled, {self.shared} B shared, "
            f"{self.resident_warps}/{max_warps} warps resident, "
            f"{self.vector_loads} of {self.loads} global load sites 16-byte (in the code, not run)"
        )


def resident_warps(regs: int, shared: int, num_warps: int, limits: dict[str, int] = SM90) -> int:
    """Warps per SM that fit by registers, shared memory, warps and blocks (the occupancy
    calculator's arithmetic, without its rarely binding corner cases)."""
    regs_per_warp = -(-max(regs, 1) * 32 // REG_UNIT) * REG_UNIT
    by_regs = (limits["regs"] // regs_per_warp) // num_warps
    by_smem = limits["smem"] // (shared + SMEM_RESERVED) if shared else limits["blocks"]
    blocks = min(by_regs, by_smem, limits["warps"] // num_warps, limits["blocks"])
    return blocks * num_warps


def _load_widths(ptx: str) -> tuple[int, int]:
    loads = re.findall(r"\bld\.global[.a-z0-9]*", ptx)
    vectors = [w for w in loads if ".v4.b32" in w or ".v2.b64" in w or ".v4.f32" in w]
    return len(vectors), len(loads)


def kernel_facts(module: ModuleType, limits: dict[str, int] = SM90) -> list[KernelFacts] | None:
    """One entry per compiled kernel in `module` (see forget), or None when unknown."""
    out: list[KernelFacts] = []
    try:
        for fn in _jit_functions(module):
            for kernel in _compiled(fn):
                meta = getattr(kernel, "metadata", None)
                regs, spills = getattr(kernel, "n_regs", None), getattr(kernel, "n_spills", None)
                if not isinstance(regs, int) or not isinstance(spills, int) or meta is None:
                    continue
                warps, shared = int(meta.num_warps), int(meta.shared)
                ptx = (getattr(kernel, "asm", None) or {}).get("ptx", "")
                vec, loads = _load_widths(ptx if isinstance(ptx, str) else "")
                out.append(
                    KernelFacts(
                        name=str(getattr(meta, "name", getattr(fn, "__name__", "?"))),
                        regs=regs,
                        spills=spills,
                        shared=shared,
                        num_warps=warps,
                        resident_warps=resident_warps(regs, shared, warps, limits),
                        vector_loads=vec,
                        loads=loads,
                    )
                )
    except Exception:  # an internal layout we do not know
        return None
    return out or None


def device_limits() -> dict[str, int]:
    """This GPU's per-SM limits where torch reports them, else sm_90's."""
    try:
        import torch

        p = torch.cuda.get_device_properties(torch.cuda.current_device())
    except Exception:
        return dict(SM90)
    threads = getattr(p, "max_threads_per_multi_processor", None)
    return {
        "warps": threads // 32 if threads else SM90["warps"],
        "blocks": SM90["blocks"],
        "regs": getattr(p, "regs_per_multiprocessor", None) or SM90["regs"],
        "smem": getattr(p, "shared_memory_per_multiprocessor", None) or SM90["smem"],
    }
