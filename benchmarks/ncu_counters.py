"""Nsight Compute (ncu) as a library: the command line that profiles one process, the parse of
its raw CSV page, and the per-call summary benchmarks/kernel_profile.py prints.

Why a module of its own: ncu's output is the one part of the profile that is not ours to shape.
Its metric names differ between versions and a name it does not know fails the whole run, so
the command is built from a list that can shrink (drop_unknown) instead of a fixed string.
"""

from __future__ import annotations

import csv
import io
import re
import shutil
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import Any

# What a missed goal needs: bytes the hardware moved (against the bytes the spec counts), time,
# how close DRAM ran to its peak, occupancy achieved against possible, spill traffic, L2 reuse.
DURATION = "gpu__time_duration.sum"
DRAM_READ = "dram__bytes_read.sum"
DRAM_WRITE = "dram__bytes_write.sum"
DRAM_PCT = "dram__throughput.avg.pct_of_peak_sustained_elapsed"
SM_PCT = "sm__throughput.avg.pct_of_peak_sustained_elapsed"
OCC_ACHIEVED = "sm__warps_active.avg.pct_of_peak_sustained_active"
OCC_THEORY = "sm__maximum_warps_per_active_cycle_pct"
REGISTERS = "launch__registers_per_thread"
GRID = "launch__grid_size"
BLOCK = "launch__block_size"
L2_HIT = "lts__t_sector_hit_rate.pct"
LOCAL_LD = "l1tex__t_bytes_pipe_lsu_mem_local_op_ld.sum"
LOCAL_ST = "l1tex__t_bytes_pipe_lsu_mem_local_op_st.sum"
METRICS: tuple[str, ...] = (
    DURATION,
    DRAM_READ,
    DRAM_WRITE,
    DRAM_PCT,
    SM_PCT,
    OCC_ACHIEVED,
    OCC_THEORY,
    REGISTERS,
    GRID,
    BLOCK,
    L2_HIT,
    LOCAL_LD,
    LOCAL_ST,
)
CORE: tuple[str, ...] = METRICS[:5]  # the last resort when ncu names no culprit


def available() -> str | None:
    return shutil.which("ncu")


def command(ncu: str, metrics: Sequence[str], argv: Sequence[str]) -> list[str]:
    """Profile only what the target runs between cudaProfilerStart and Stop, at the clocks the
    GPU runs at anyway, each kernel replayed from a flushed cache (as do_bench times it)."""
    return [
        ncu,
        "--clock-control",
        "none",
        "--profile-from-start",
        "off",
        "--cache-control",
        "all",
        "--print-units",
        "base",
        "--csv",
        "--page",
        "raw",
        "--metrics",
        ",".join(metrics),
        *argv,
    ]


def drop_unknown(metrics: Sequence[str], output: str) -> tuple[str, ...]:
    """The metrics left after removing those ncu's error lines name; CORE if it names none."""
    errors = [ln for ln in output.splitlines() if "ERROR" in ln or "metric" in ln.lower()]
    named = {m for m in metrics for ln in errors if m in ln}
    kept = tuple(m for m in metrics if m not in named)
    return kept if named and kept else CORE


def parse_raw_csv(text: str) -> list[dict[str, str]]:
    """One dict per profiled kernel from `--csv --page raw` output mixed with the target's own
    lines. The header row starts with "ID"; ncu's units row (ID empty) is skipped."""
    lines = text.splitlines()
    start = next((i for i, ln in enumerate(lines) if ln.startswith('"ID"')), None)
    if start is None:
        return []
    body = [ln for ln in lines[start:] if ln.startswith('"')]
    rows = list(csv.reader(io.StringIO("\n".join(body))))
    header, kernels = rows[0], []
    for row in rows[1:]:
        if len(row) == len(header) and row[0].strip().isdigit():
            kernels.append(dict(zip(header, row, strict=True)))
    return kernels


def number(value: str | None) -> float | None:
    if value is None:
        return None
    cleaned = re.sub(r"[,\s]", "", value)
    try:
        return float(cleaned)
    except ValueError:
        return None


@dataclass
class CallProfile:
    """What ncu read for one call of a variant: possibly several kernels (eager's rotary runs
    four), summed where a sum means something and weighted by duration where it does not."""

    kernels: list[str]
    us: float
    dram_read: float | None
    dram_write: float | None
    dram_pct: float | None
    sm_pct: float | None
    occ_achieved: float | None
    occ_theory: float | None
    registers: int | None
    grid: int | None
    block: int | None
    l2_hit: float | None
    local_bytes: float | None

    def moved(self) -> float | None:
        if self.dram_read is None or self.dram_write is None:
            return None
        return self.dram_read + self.dram_write

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


def _weighted(kernels: list[dict[str, str]], key: str, weights: list[float]) -> float | None:
    pairs = [(number(k.get(key)), w) for k, w in zip(kernels, weights, strict=True)]
    pairs = [(v, w) for v, w in pairs if v is not None]
    total = sum(w for _, w in pairs)
    return sum(v * w for v, w in pairs) / total if pairs and total > 0 else None


def _summed(kernels: list[dict[str, str]], *keys: str) -> float | None:
    values = [number(k.get(key)) for k in kernels for key in keys]
    return None if not values or any(v is None for v in values) else sum(values)  # type: ignore[misc]


def summarize(kernels: list[dict[str, str]]) -> CallProfile | None:
    """Durations are in ns (--print-units base); the launch shape is the longest kernel's."""
    if not kernels:
        return None
    ns = [number(k.get(DURATION)) or 0.0 for k in kernels]
    main = kernels[max(range(len(ns)), key=ns.__getitem__)]

    def as_int(key: str) -> int | None:
        v = number(main.get(key))
        return None if v is None else int(v)

    return CallProfile(
        kernels=[k.get("Kernel Name", "?") for k in kernels],
        us=sum(ns) / 1e3,
        dram_read=_summed(kernels, DRAM_READ),
        dram_write=_summed(kernels, DRAM_WRITE),
        dram_pct=_weighted(kernels, DRAM_PCT, ns),
        sm_pct=_weighted(kernels, SM_PCT, ns),
        occ_achieved=_weighted(kernels, OCC_ACHIEVED, ns),
        occ_theory=_weighted(kernels, OCC_THEORY, ns),
        registers=as_int(REGISTERS),
        grid=as_int(GRID),
        block=as_int(BLOCK),
        l2_hit=_weighted(kernels, L2_HIT, ns),
        local_bytes=_summed(kernels, LOCAL_LD, LOCAL_ST),
    )
