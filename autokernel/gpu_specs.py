"""The datasheet table of GPUs and the estimate for GPUs it lacks: what "peak" means on paper.

Datasheet figures are dense (kernels here never use 2:4 sparsity), and fp16/bf16 figures are for
fp32 accumulation, since every kernel here accumulates in fp32. gpu.py prefers a measured
ceiling over these when it has one.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Literal

Vendor = Literal["nvidia", "amd"]
Source = Literal["datasheet", "estimate"]


@dataclass(frozen=True)
class GPUSpec:
    """Peak figures of one GPU model; TFLOPS are dense. On AMD, sm_count counts compute units."""

    name: str
    vendor: Vendor
    arch: str  # "sm_90" (compute capability 9.0) or an AMD target such as "gfx942"
    memory_gb: float | None
    mem_bandwidth_gbs: float | None
    fp32_tflops: float  # vector ALUs, no tensor cores
    tf32_tflops: float | None  # None: no TF32 matrix path (before Ampere; AMD CDNA 4)
    bf16_tflops: float  # fp16 and bf16 tensor rate with fp32 accumulate (equal on all listed)
    fp8_tflops: float | None
    sm_count: int
    l2_mb: float | None
    source: Source
    note: str  # the datasheet the figures come from, or how the estimate was made

    @property
    def compute_capability(self) -> tuple[int, int] | None:
        if not self.arch.startswith("sm_"):
            return None
        digits = self.arch.removeprefix("sm_")
        return int(digits[:-1]), int(digits[-1])


@dataclass(frozen=True)
class _Entry:
    spec: GPUSpec
    names: tuple[str, ...]  # torch.cuda.get_device_name() strings, matched exactly
    aliases: tuple[str, ...]  # short forms, matched after normalization


def _sheet(
    name: str,
    vendor: Vendor,
    arch: str,
    figures: tuple[float, float, float, float | None, float, float | None, int, float],
    *,
    note: str,
    names: tuple[str, ...],
    aliases: tuple[str, ...] = (),
) -> _Entry:
    """figures: memory GB, GB/s, fp32, tf32, bf16, fp8 (dense TFLOPS), SMs or CUs, L2 MB."""
    gb, gbs, fp32, tf32, bf16, fp8, sms, l2 = figures
    spec = GPUSpec(
        name=name,
        vendor=vendor,
        arch=arch,
        memory_gb=float(gb),
        mem_bandwidth_gbs=float(gbs),
        fp32_tflops=float(fp32),
        tf32_tflops=None if tf32 is None else float(tf32),
        bf16_tflops=float(bf16),
        fp8_tflops=None if fp8 is None else float(fp8),
        sm_count=sms,
        l2_mb=float(l2),
        source="datasheet",
        note=note,
    )
    return _Entry(spec, names, aliases)


# One line of provenance per entry (note=). NVIDIA sheets print sparse tensor figures with "1/2
# lower without sparsity": the dense figures here are those halves.
# fmt: off
ENTRIES: tuple[_Entry, ...] = (
    _sheet(
        "H100 SXM", "nvidia", "sm_90", (80, 3350, 67, 494.5, 989.5, 1979, 132, 50),
        note="NVIDIA H100 datasheet, SXM column; 132 SMs, 50 MB L2 from the Hopper whitepaper",
        names=("NVIDIA H100 80GB HBM3",), aliases=("H100", "H100 SXM", "H100 SXM5"),
    ),
    _sheet(
        "H100 PCIe", "nvidia", "sm_90", (80, 2000, 51, 378, 756.5, 1513, 114, 50),
        note="NVIDIA H100 datasheet, PCIe column; 114 SMs from the Hopper whitepaper",
        names=("NVIDIA H100 PCIe",),
    ),
    _sheet(
        "H200", "nvidia", "sm_90", (141, 4800, 67, 494.5, 989.5, 1979, 132, 60),
        note="NVIDIA H200 datasheet, SXM column; 60 MB L2 as CUDA reports it on the lent H200",
        names=("NVIDIA H200",), aliases=("H200 SXM",),
    ),
    _sheet(
        "B200", "nvidia", "sm_100", (180, 8000, 75, 1100, 2250, 4500, 148, 126),
        note="NVIDIA HGX B200 spec (1000 W) per GPU; 8 TB/s per DGX B200 (HGX page: 7.7 TB/s)",
        names=("NVIDIA B200",), aliases=("B200 SXM",),
    ),
    _sheet(
        "A100 SXM 80GB", "nvidia", "sm_80", (80, 2039, 19.5, 156, 312, None, 108, 40),
        note="NVIDIA A100 datasheet, 80GB SXM column; 108 SMs, 40 MB L2 (Ampere whitepaper)",
        names=("NVIDIA A100-SXM4-80GB",), aliases=("A100 SXM4 80GB", "A100 80GB"),
    ),
    _sheet(
        "A100 SXM 40GB", "nvidia", "sm_80", (40, 1555, 19.5, 156, 312, None, 108, 40),
        note="NVIDIA A100 datasheet, 40GB SXM column",
        names=("NVIDIA A100-SXM4-40GB",), aliases=("A100 SXM4 40GB", "A100 40GB"),
    ),
    _sheet(
        "A100 PCIe 80GB", "nvidia", "sm_80", (80, 1935, 19.5, 156, 312, None, 108, 40),
        note="NVIDIA A100 datasheet, 80GB PCIe column",
        names=("NVIDIA A100 80GB PCIe",),
    ),
    _sheet(
        "A100 PCIe 40GB", "nvidia", "sm_80", (40, 1555, 19.5, 156, 312, None, 108, 40),
        note="NVIDIA A100 datasheet, 40GB PCIe column",
        names=("NVIDIA A100-PCIE-40GB",),
    ),
    _sheet(
        "L40S", "nvidia", "sm_89", (48, 864, 91.6, 183, 362.05, 733, 142, 96),
        note="NVIDIA L40S datasheet",
        names=("NVIDIA L40S",),
    ),
    _sheet(
        # Half the L40S tensor rate at the same clocks: fp32 accumulate runs at half rate on L40.
        "L40", "nvidia", "sm_89", (48, 864, 90.5, 90.5, 181.05, 362, 142, 96),
        note="NVIDIA L40 datasheet",
        names=("NVIDIA L40",),
    ),
    _sheet(
        "L4", "nvidia", "sm_89", (24, 300, 30.3, 60, 121, 242.5, 58, 48),
        note="NVIDIA L4 datasheet",
        names=("NVIDIA L4",),
    ),
    _sheet(
        "A10", "nvidia", "sm_86", (24, 600, 31.2, 62.5, 125, None, 72, 6),
        note="NVIDIA A10 datasheet; 72 SMs, 6 MB L2 (GA102)",
        names=("NVIDIA A10",),
    ),
    # GeForce: fp16/bf16 MMA with fp32 accumulate runs at half the fp16-accumulate rate (4090:
    # 165.2 vs 330.3 TFLOPS). Kernels here accumulate in fp32, so the fp32-accumulate figure.
    _sheet(
        "RTX 4090", "nvidia", "sm_89", (24, 1008, 82.6, 82.6, 165.2, 330.3, 128, 72),
        note="NVIDIA Ada whitepaper, RTX 4090 column, fp32-accumulate tensor figures",
        names=("NVIDIA GeForce RTX 4090",),
    ),
    _sheet(
        "RTX 4080", "nvidia", "sm_89", (16, 716.8, 48.7, 48.7, 97.5, 194.9, 76, 64),
        note="NVIDIA Ada whitepaper, RTX 4080 (16 GB) column, fp32-accumulate tensor figures",
        names=("NVIDIA GeForce RTX 4080",),
    ),
    _sheet(
        "RTX 3090", "nvidia", "sm_86", (24, 936, 35.6, 35.6, 71, None, 82, 6),
        note="NVIDIA GA102 whitepaper, RTX 3090 column, fp32-accumulate tensor figures",
        names=("NVIDIA GeForce RTX 3090",),
    ),
    _sheet(
        # The 12 GB card (70 SMs, 912 GB/s) reports the same device name.
        "RTX 3080", "nvidia", "sm_86", (10, 760, 29.8, 29.8, 59.5, None, 68, 5),
        note="NVIDIA GA102 whitepaper, RTX 3080 (10 GB) column, fp32-accumulate tensor figures",
        names=("NVIDIA GeForce RTX 3080",),
    ),
    # AMD: l2_mb is L2 (4 MB per XCD); the 256 MB Infinity Cache sits behind it.
    _sheet(
        "MI300X", "amd", "gfx942", (192, 5300, 81.7, 653.7, 1307.4, 2614.9, 304, 32),
        note="AMD Instinct MI300X datasheet (fp32 = vector); CUs and caches from ROCm GPU specs",
        names=("AMD Instinct MI300X",), aliases=("MI300X",),
    ),
    _sheet(
        "MI325X", "amd", "gfx942", (256, 6000, 81.7, 653.7, 1307.4, 2614.9, 304, 32),
        note="AMD Instinct MI325X datasheet: MI300X compute, HBM3E",
        names=("AMD Instinct MI325X",), aliases=("MI325X",),
    ),
    _sheet(
        # CDNA 4 has no xf32 MFMA (LLVM rejects v_mfma_*_xf32 on gfx950): no TF32 figure.
        "MI350X", "amd", "gfx950", (288, 8000, 144.2, None, 2306.9, 4613.7, 256, 32),
        note="AMD Instinct MI350X datasheet (256 CUs at 2200 MHz)",
        names=("AMD Instinct MI350X",), aliases=("MI350X",),
    ),
    _sheet(
        "MI355X", "amd", "gfx950", (288, 8000, 157.3, None, 2516.6, 5033.2, 256, 32),
        note="AMD Instinct MI355X datasheet (256 CUs at 2400 MHz)",
        names=("AMD Instinct MI355X",), aliases=("MI355X",),
    ),
)
# fmt: on

GPU_TABLE: dict[str, GPUSpec] = {e.spec.name: e.spec for e in ENTRIES}
_BY_DEVICE_NAME: dict[str, GPUSpec] = {n: e.spec for e in ENTRIES for n in e.names}

# Words that name the vendor, brand, package or memory, never a different model.
_BENIGN = frozenset({"nvidia", "amd", "geforce", "instinct", "tesla", "gpu", "vf", "oam", "sxm"})
_BENIGN_RE = re.compile(r"\d+gb|hbm\d*e?")


def _tokens(name: str) -> frozenset[str]:
    """Case- and spacing-insensitive words: "RTX 4090" == "rtx4090", "80 GB" == "80GB"."""
    out: list[str] = []
    for tok in re.findall(r"[a-z0-9]+", name.lower()):
        if out and ((out[-1].isalpha() and tok.isdigit()) or (out[-1].isdigit() and tok == "gb")):
            out[-1] += tok
        else:
            out.append(re.sub(r"^sxm\d*$", "sxm", tok))
    return frozenset(out)


_ALIASES: tuple[tuple[frozenset[str], GPUSpec], ...] = tuple(
    {(_tokens(a), e.spec) for e in ENTRIES for a in (e.spec.name, *e.names, *e.aliases)}
)


def lookup(name: str) -> GPUSpec | None:
    """The table entry for a device name, or None.

    Exact names first. Otherwise the alias with the most words wins ("L40S" is one word, so it
    never matches "L40"), and any word left over that could name another model ("Ti", "SUPER",
    "NVL", "D", "Laptop") rejects the match: a wrong datasheet is worse than an estimate."""
    exact = _BY_DEVICE_NAME.get(name.strip())
    if exact is not None:
        return exact
    words = _tokens(name)
    best: tuple[frozenset[str], GPUSpec] | None = None
    best_score, tied = (0, 0), False
    for alias, spec in _ALIASES:
        if not alias <= words:
            continue
        score = (len(alias), sum(map(len, alias)))
        if score > best_score:
            best, best_score, tied = (alias, spec), score, False
        elif score == best_score and best is not None and best[1] is not spec:
            tied = True
    if best is None or tied:
        return None
    leftover = words - best[0]
    if any(w not in _BENIGN and not _BENIGN_RE.fullmatch(w) for w in leftover):
        return None
    return best[1]


@dataclass(frozen=True)
class _Rates:
    """Dense FLOPs per clock per SM (per CU on AMD), fp32 accumulate, and a typical max clock.

    tensor_clock: the fraction of the max clock that tensor figures assume. H100/H200 and B200
    report 1980 MHz, but their datasheet tensor figures hold at 1830 and 1855 MHz (power-bound);
    their fp32 figures use the full 1980."""

    family: str
    bf16: int
    fp32: int
    tf32: int | None
    fp8: int | None
    clock_mhz: int
    tensor_clock: float = 1.0


# Each rate checked against a datasheet: SMs x clock x rate reproduces the part in the comment.
_NVIDIA_RATES: dict[tuple[int, int], _Rates] = {
    (6, 0): _Rates("Pascal (no tensor cores)", 128, 128, None, None, 1480),
    (7, 0): _Rates("Volta", 1024, 128, None, None, 1530),  # V100 SXM2: 80 SMs -> 125 TFLOPS
    (7, 5): _Rates("Turing", 1024, 128, None, None, 1590),  # T4: 40 SMs -> 65
    (8, 0): _Rates("Ampere GA100", 2048, 128, 1024, None, 1410),  # A100: 108 SMs -> 312
    (8, 6): _Rates("Ampere GA10x", 1024, 256, 512, None, 1695),  # A10: 72 SMs -> 125
    (8, 9): _Rates("Ada", 1024, 256, 512, 2048, 2520),  # L40S: 142 SMs -> 366 (sheet: 362)
    (9, 0): _Rates("Hopper", 4096, 256, 2048, 8192, 1980, 1830 / 1980),  # H100 SXM: 132 -> 989
    (10, 0): _Rates("Blackwell", 8192, 256, 4096, 16384, 1980, 1855 / 1980),  # B200: 148 -> 2250
    # RTX 5090: 170 SMs -> 419 at fp16 accumulate (the GeForce rule below halves it)
    (12, 0): _Rates("Blackwell RTX", 1024, 256, 512, 2048, 2407),
}
_AMD_RATES: dict[str, _Rates] = {
    "gfx908": _Rates("CDNA", 1024, 128, None, None, 1502),  # MI100: 120 CUs -> 185
    "gfx90a": _Rates("CDNA 2", 1024, 128, None, None, 1700),  # MI250X: 220 CUs -> 383
    "gfx942": _Rates("CDNA 3", 2048, 128, 1024, 4096, 2100),  # MI300X: 304 CUs -> 1307
    "gfx950": _Rates("CDNA 4", 4096, 256, None, 8192, 2400),  # MI355X: 256 CUs -> 2517
}
_AMD_RDNA = _Rates("RDNA (WMMA)", 512, 256, None, None, 2500)  # RX 7900 XTX: 96 CUs -> 123


def _rates_for(arch: tuple[int, int] | str) -> tuple[Vendor, str, _Rates]:
    if isinstance(arch, str):
        target = arch.split(":")[0]
        if target in _AMD_RATES:
            return "amd", target, _AMD_RATES[target]
        if target.startswith("gfx1"):
            return "amd", target, _AMD_RDNA
        return "amd", target or "gfx?", _AMD_RATES["gfx942"]
    # A newer minor (8.7, 10.3, 12.1) shares its nearest older sibling's per-SM rates.
    known = max((cc for cc in _NVIDIA_RATES if cc <= arch), default=(6, 0))
    return "nvidia", f"sm_{arch[0]}{arch[1]}", _NVIDIA_RATES[known]


def estimate_spec(
    name: str,
    sm_count: int,
    clock_mhz: float | None,
    mem_clock_mhz: float | None,
    bus_width_bits: int | None,
    compute_capability: tuple[int, int] | str,
    *,
    memory_gb: float | None = None,
    l2_mb: float | None = None,
) -> GPUSpec:
    """Peak figures for a GPU the table lacks: SMs x clock x the architecture's per-SM rates.

    compute_capability is (major, minor) on NVIDIA or the gfx target string on AMD. Without a
    clock, the architecture's typical boost clock is used and the note says so. Bandwidth is
    memory clock x bus width x 2 (DDR) / 8, NVIDIA only: HIP's HBM clocks do not follow that
    rule (an MI300X would come out at half), so AMD estimates leave bandwidth unknown."""
    vendor, arch, rates = _rates_for(compute_capability)
    clock = clock_mhz or rates.clock_mhz
    clock_how = "reported clock" if clock_mhz else f"typical {rates.family} clock, none reported"
    per_rate = sm_count * clock * 1e6 / 1e12  # TFLOPS per FLOP/clock/SM
    tensor = per_rate * rates.tensor_clock
    halved = (
        vendor == "nvidia"
        and "geforce" in name.lower()
        and isinstance(compute_capability, tuple)
        and compute_capability >= (7, 5)
    )
    if halved:  # GeForce runs fp32-accumulate MMA at half rate (4090: 165 of 330 TFLOPS)
        tensor /= 2
    bandwidth = None
    if vendor == "nvidia" and mem_clock_mhz and bus_width_bits:
        bandwidth = round(mem_clock_mhz * bus_width_bits * 2 / 8 / 1000, 1)
    note = (
        f"estimate: {sm_count} {'CUs' if vendor == 'amd' else 'SMs'} x {clock:.0f} MHz "
        f"({clock_how}) x {rates.family} per-{'CU' if vendor == 'amd' else 'SM'} rates"
        + (", GeForce half-rate fp32 accumulate" if halved else "")
        + ("; bandwidth from memory clock x bus width" if bandwidth else "; bandwidth unknown")
    )
    return GPUSpec(
        name=name,
        vendor=vendor,
        arch=arch,
        memory_gb=memory_gb,
        mem_bandwidth_gbs=bandwidth,
        fp32_tflops=round(per_rate * rates.fp32, 1),
        tf32_tflops=None if rates.tf32 is None else round(tensor * rates.tf32, 1),
        bf16_tflops=round(tensor * rates.bf16, 1),
        fp8_tflops=None if rates.fp8 is None else round(tensor * rates.fp8, 1),
        sm_count=sm_count,
        l2_mb=l2_mb,
        source="estimate",
        note=note,
    )
