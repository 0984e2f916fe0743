"""`autokernel gpu` and the machine line: the datasheet table, this machine's GPU and the
ceilings measured on it."""

from __future__ import annotations

from rich.table import Table
from rich.text import Text

from autokernel.views.console import compact_table


def _fmt(x: float | None, spec: str = ".2f", suffix: str = "") -> str:
    return "—" if x is None else f"{x:{spec}}{suffix}"


def gpu_table(rows: list[dict]) -> Table:
    t = compact_table("GPU table (datasheet, dense)")
    for col in ("GPU", "arch", "memory GB", "GB/s", "bf16 TFLOPS", "fp32 TFLOPS", "SMs/CUs",
                "L2 MB", "reported as"):  # fmt: skip
        figure = col not in ("GPU", "arch", "reported as")
        t.add_column(col, justify="right" if figure else "left", no_wrap=col != "reported as",
                     overflow="fold")  # fmt: skip
    for r in rows:
        t.add_row(
            r["name"], r["arch"], _fmt(r["memory_gb"], ".0f"), _fmt(r["mem_bandwidth_gbs"], ".0f"),
            _fmt(r["bf16_tflops"], ".0f"), _fmt(r["fp32_tflops"], ".1f"), str(r["sm_count"]),
            _fmt(r["l2_mb"], ".0f"), r["device_names"],
        )  # fmt: skip
    return t


def machine_view(detected, ceilings) -> Text:
    if detected is None:
        return Text(
            "this machine: no CUDA/ROCm GPU — kernels run in the Triton interpreter and timings "
            "are CPU figures (no % of peak)",
            "yellow",
        )
    text = Text.assemble(
        ("this machine: ", "bold"), f"{detected.name} ({detected.source}: {detected.note})\n"
    )
    if ceilings is not None:
        text.append(
            f"measured ceilings: copy {ceilings.copy_gbs:.0f} GB/s, bf16 matmul "
            f"{ceilings.matmul_tflops_bf16:.0f} TFLOPS (torch {ceilings.torch_version}, "
            f"{ceilings.measured_at}); % of peak uses these"
        )
    return text
