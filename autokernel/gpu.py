"""Which GPU this is and how fast it can go, so that "% of peak" means something.

Three sources, best first: ceilings measured once per machine (a device copy and a cuBLAS bf16
matmul, cached), the datasheet table (gpu_specs.py), and an estimate from SM count, clock and
architecture for GPUs the table lacks. The measured ceiling wins when present because it is what
a kernel can actually reach: the lent H200 copies at 4249 of its 4800 datasheet GB/s, so 90 % of
the datasheet is nearly out of reach while 90 % of the measured copy leaves little to gain.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, fields, replace
from datetime import datetime, timezone
from typing import Literal

import torch

from autokernel import gpu_specs
from autokernel.cache import cache_dir, read_json, write_json_atomic
from autokernel.gpu_specs import GPUSpec, estimate_spec, lookup

Bound = Literal["memory", "compute"]
GPU_TABLE = gpu_specs.GPU_TABLE  # callers know the table as gpu.GPU_TABLE

COPY_NUMEL = 2**30  # bf16 elements per copy buffer: 2 GiB each, 4.3 GB moved, ~70x an H200's L2
MATMUL_N = 4096  # cuBLAS bf16 N^3, the anchor shape (727.7 TFLOPS on the lent H200)
CEILINGS_FILE = "ceilings.json"


class NoGPUError(RuntimeError):
    """A measurement was asked for on a machine without a CUDA or ROCm device."""


def _clocks(props: object, index: int) -> tuple[float | None, float | None, int | None]:
    """SM clock and memory clock (MHz) and bus width (bits): from torch's device properties
    where it has them (torch 2.11 does, in kHz), else from the driver attributes Triton reads
    (pynvml is not a dependency); None for each that neither gives."""
    values = [getattr(props, k, 0) or 0 for k in ("clock_rate", "memory_clock_rate")]
    bus = getattr(props, "memory_bus_width", 0) or 0
    if not all(values) or not bus:
        try:
            from triton.runtime import driver

            attrs = driver.active.utils.get_device_properties(index)
            values = [attrs.get(k) or 0 for k in ("sm_clock_rate", "mem_clock_rate")]
            bus = attrs.get("mem_bus_width") or 0
        except Exception:  # no Triton backend for this device: typical clocks, no bandwidth
            pass
    sm_mhz, mem_mhz = (khz / 1000 if khz > 0 else None for khz in values)
    return sm_mhz, mem_mhz, (int(bus) if bus > 0 else None)


def detect(device: int | None = None) -> GPUSpec | None:
    """The current (or given) device's spec: the table entry, else an estimate; None without
    a CUDA or ROCm device."""
    if not torch.cuda.is_available():
        return None
    index = torch.cuda.current_device() if device is None else device
    name = torch.cuda.get_device_name(index)
    spec = lookup(name)
    if spec is not None:
        return spec
    props = torch.cuda.get_device_properties(index)
    arch: tuple[int, int] | str = (props.major, props.minor)
    if torch.version.hip:
        arch = str(getattr(props, "gcnArchName", ""))
    clock, mem_clock, bus = _clocks(props, index)
    l2 = getattr(props, "L2_cache_size", 0) or 0
    return estimate_spec(
        name,
        props.multi_processor_count,
        clock,
        mem_clock,
        bus,
        arch,
        memory_gb=round(props.total_memory / 2**30, 1),
        l2_mb=round(l2 / 2**20, 1) if l2 else None,
    )


@dataclass(frozen=True)
class Ceilings:
    """What this machine reaches in practice: a device copy and a cuBLAS matmul."""

    gpu_name: str
    copy_gbs: float  # (bytes read + bytes written) / s / 1e9
    matmul_tflops_bf16: float  # torch.matmul bf16 MATMUL_N^3
    measured_at: str  # ISO 8601, UTC
    torch_version: str


def _copy_gbs(dev: torch.device, numel: int) -> float:
    from autokernel.timing import measure

    src = torch.randn(numel, device=dev, dtype=torch.bfloat16)
    dst = torch.empty_like(src)
    us = measure(lambda: dst.copy_(src), on_gpu=True).median_us
    return 2 * src.nbytes / us / 1e3  # read + write


def _matmul_tflops(dev: torch.device, n: int) -> float:
    from autokernel.timing import measure

    a = torch.randn(n, n, device=dev, dtype=torch.bfloat16)
    b = torch.randn(n, n, device=dev, dtype=torch.bfloat16)
    us = measure(lambda: torch.matmul(a, b), on_gpu=True).median_us
    return 2 * n**3 / us / 1e6


def measure_ceilings(device: int | None = None) -> Ceilings:
    """Time a COPY_NUMEL bf16 device copy and a bf16 MATMUL_N^3 matmul (do_bench medians).

    Seconds of GPU time; run it on an otherwise idle GPU, or the figures are low for good."""
    if not torch.cuda.is_available():
        raise NoGPUError("measuring ceilings needs a CUDA or ROCm device")
    index = torch.cuda.current_device() if device is None else device
    dev = torch.device("cuda", index)
    with torch.cuda.device(index):
        free_bytes, _ = torch.cuda.mem_get_info()
        numel = min(COPY_NUMEL, free_bytes // 8)  # both buffers in at most half the free memory
        copy_gbs = _copy_gbs(dev, numel)
        matmul_tflops = _matmul_tflops(dev, MATMUL_N)
    return Ceilings(
        gpu_name=torch.cuda.get_device_name(index),
        copy_gbs=round(copy_gbs, 1),
        matmul_tflops_bf16=round(matmul_tflops, 1),
        measured_at=datetime.now(timezone.utc).isoformat(timespec="seconds"),
        torch_version=torch.__version__,
    )


def _device_name(device: int | None) -> str | None:
    if not torch.cuda.is_available():
        return None
    return torch.cuda.get_device_name(torch.cuda.current_device() if device is None else device)


def _cache_key(gpu_name: str, torch_version: str) -> str:
    # A new torch brings a new cuBLAS, whose matmul rate can differ: measure again.
    return f"{gpu_name} | torch {torch_version}"


def _parse_ceilings(raw: object) -> Ceilings | None:
    if not isinstance(raw, dict):
        return None
    try:
        c = Ceilings(**{f.name: raw[f.name] for f in fields(Ceilings)})
    except KeyError:
        return None
    numbers_ok = all(
        isinstance(v, (int, float)) and v > 0 for v in (c.copy_gbs, c.matmul_tflops_bf16)
    )
    return c if numbers_ok else None


def load_or_measure(force: bool = False, device: int | None = None) -> Ceilings | None:
    """This machine's ceilings from the cache, measured first if missing (or if force); None
    without a GPU. Cached in <cache dir>/ceilings.json, keyed by GPU name and torch version."""
    name = _device_name(device)
    if name is None:
        return None
    path = cache_dir() / CEILINGS_FILE
    key = _cache_key(name, torch.__version__)
    if not force:
        cached = _parse_ceilings(read_json(path).get(key))
        if cached is not None:
            return cached
    ceilings = measure_ceilings(device)
    data = read_json(path)  # re-read: another process may have added its GPU meanwhile
    ceilings = _highest(ceilings, _parse_ceilings(data.get(key)))
    data[key] = asdict(ceilings)
    write_json_atomic(path, data)
    return ceilings


def _highest(new: Ceilings, old: Ceilings | None) -> Ceilings:
    """Each figure the higher of two measurements: a neighbour on the GPU can only slow a
    copy or a matmul down, so a lower reading is contention, never the machine's ceiling."""
    if old is None:
        return new
    return replace(
        new,
        copy_gbs=max(new.copy_gbs, old.copy_gbs),
        matmul_tflops_bf16=max(new.matmul_tflops_bf16, old.matmul_tflops_bf16),
    )


_DTYPE_KINDS = {
    "bfloat16": "bf16",
    "bf16": "bf16",
    "float16": "fp16",
    "fp16": "fp16",
    "half": "fp16",
    "float32": "fp32",
    "fp32": "fp32",
    "float": "fp32",
    "tf32": "tf32",
    "fp8": "fp8",
}


def _dtype_kind(dtype: torch.dtype | str) -> str:
    name = str(dtype).lower().removeprefix("torch.")
    if name.startswith("float8"):
        return "fp8"
    try:
        return _DTYPE_KINDS[name]
    except KeyError:
        raise ValueError(f"no peak rate for dtype {dtype!r}") from None


def peak_bandwidth_gbs(spec: GPUSpec | None, ceilings: Ceilings | None) -> float | None:
    """The measured copy rate when present, else the spec's bandwidth; None if neither."""
    if ceilings is not None:
        return ceilings.copy_gbs
    return None if spec is None else spec.mem_bandwidth_gbs


def peak_tflops(
    spec: GPUSpec | None, ceilings: Ceilings | None, dtype: torch.dtype | str
) -> float | None:
    """Peak matrix rate for a dtype: bf16/fp16 -> the measured bf16 matmul rate when present,
    else the tensor figure; tf32/fp8 -> their tensor figure scaled by measured/datasheet bf16
    (the same tensor cores, the same attainable fraction); fp32 -> the non-tensor figure.
    None when the GPU has no such path (fp8 before Ada, tf32 on CDNA 4) or nothing is known."""
    kind = _dtype_kind(dtype)
    if kind == "fp32":
        return None if spec is None else spec.fp32_tflops
    if kind in ("bf16", "fp16") and ceilings is not None:
        return ceilings.matmul_tflops_bf16
    if spec is None:
        return None
    figure = {
        "bf16": spec.bf16_tflops,
        "fp16": spec.bf16_tflops,
        "tf32": spec.tf32_tflops,
        "fp8": spec.fp8_tflops,
    }[kind]
    if figure is None or ceilings is None:
        return figure
    return round(figure * ceilings.matmul_tflops_bf16 / spec.bf16_tflops, 1)


def pct_of_peak(achieved: float, peak: float | None) -> float | None:
    """achieved as a percentage of peak; None when there is no peak to compare with."""
    if peak is None or peak <= 0:
        return None
    return 100.0 * achieved / peak


@dataclass(frozen=True)
class Roofline:
    """One timed run placed against its ceiling: bandwidth if memory-bound, else FLOPS."""

    bound: Bound
    unit: str  # "GB/s" or "TFLOPS"
    achieved: float
    peak: float | None
    pct: float | None
    peak_source: str | None  # "measured", "datasheet" or "estimate"; None without a peak


def roofline(
    spec: GPUSpec | None,
    ceilings: Ceilings | None,
    bound: Bound,
    flops: float,
    bytes_moved: float,
    seconds: float,
    dtype: torch.dtype | str,
) -> Roofline:
    """Throughput of a run that did `flops` and moved `bytes_moved` in `seconds`, and its % of
    the peak that bounds it."""
    if bound == "memory":
        achieved, unit = bytes_moved / seconds / 1e9, "GB/s"
        peak = peak_bandwidth_gbs(spec, ceilings)
        measured = ceilings is not None
    else:
        achieved, unit = flops / seconds / 1e12, "TFLOPS"
        peak = peak_tflops(spec, ceilings, dtype)
        measured = ceilings is not None and _dtype_kind(dtype) != "fp32"
    source: str | None = None
    if peak is not None:
        source = "measured" if measured else spec.source if spec is not None else None
    return Roofline(bound, unit, achieved, peak, pct_of_peak(achieved, peak), source)


def table_rows() -> list[dict[str, str | float | int | None]]:
    """The whole table as data, one dict per GPU in GPUSpec field order, plus the device
    names each entry matches exactly: what `autokernel gpu` renders."""
    return [{**asdict(e.spec), "device_names": ", ".join(e.names)} for e in gpu_specs.ENTRIES]
