"""Rich renderings of verdicts and tables for the CLI (library code returns data; this draws it)."""

from __future__ import annotations

import os

from rich import box
from rich.console import Console, Group
from rich.table import Table
from rich.text import Text

from autokernel.harness.verdict import Status, Verdict

STATUS_STYLE = {
    Status.PASS: "bold green",
    Status.FAIL: "bold red",
    Status.CRASH: "bold magenta",
    Status.TIMEOUT: "bold yellow",
    Status.REJECTED: "bold red",
}


def compact_table(title: str) -> Table:
    """A table without vertical rules or edge padding: ten figure columns fit in 100 columns."""
    return Table(title=title, title_justify="left", box=box.SIMPLE_HEAD, pad_edge=False,
                 collapse_padding=True)  # fmt: skip


def _fmt(x: float | None, spec: str = ".2f", suffix: str = "") -> str:
    return "—" if x is None else f"{x:{spec}}{suffix}"


def verdict_view(v: Verdict) -> Group:
    head = Text.assemble(
        (f"{v.status.value}", STATUS_STYLE[v.status]),
        f"  {v.kernel_type}  {v.file}\n",
        (f"device: {v.device or '?'}" + ("  (Triton interpreter)" if v.interpreter else ""), "dim"),
        (f"  seed {v.seed}  harness {v.harness_s:.1f} s", "dim"),
        (_build_text(v), "dim"),
    )
    parts: list = [head]
    if v.stages:
        stages = compact_table("correctness stages")
        for col in ("stage", "result", "checks", "worst (size, dtype)", "max abs err", "s"):
            stages.add_column(col, no_wrap=True)
        for s in v.stages:
            style = {"PASS": "green", "FAIL": "red"}.get(s.status, "dim")
            worst = f"{s.worst.size} {s.worst.dtype}" if s.worst else ""
            err = f"{s.worst.max_abs_err:.2e}" if s.worst else ""
            stages.add_row(
                s.name, Text(s.status, style), str(s.checks), worst, err, f"{s.seconds:.2f}"
            )
        parts.append(stages)
    if v.failure:
        f = v.failure
        where = " ".join(x for x in (f.stage, f.size, f.dtype) if x)
        parts.append(Text.assemble(("failure ", "bold"), (f"[{where}] ", "bold"), f.message))
    if v.timings:
        t = compact_table(f"speed — {v.clock}")
        for col in ("size", "dtype", "µs", "±", "rate", "%peak", "eager", "compile", "×eager",
                    "×compile"):  # fmt: skip
            t.add_column(col, justify="right", no_wrap=True)
        for r in v.timings:
            t.add_row(
                r.size, r.dtype.replace("float", "f").replace("bf", "bf"), f"{r.us:.4g}",
                f"{r.spread_us:.2g}", f"{r.throughput:.4g} {r.unit}", _fmt(r.pct_peak, ".1f"),
                _fmt(r.eager_us, ".4g"), _fmt(r.compile_us, ".4g"),
                _fmt(r.speedup_vs_eager, ".2f"), _fmt(r.speedup_vs_compile, ".2f"),
            )  # fmt: skip
        parts.append(t)
    for g in v.guards:
        parts.append(Text(f"note: {g}", "yellow"))
    return Group(*parts)


def _build_text(v: Verdict) -> str:
    """The CUDA build's time: compiled now, or loaded from the cache."""
    if v.build_s is None:
        return ""
    compiled = [b["compile_s"] for b in v.builds if b.get("compile_s") is not None]
    how = f"compiled in {sum(compiled):.1f} s" if compiled else "from the cache"
    return f"  CUDA build {v.build_s:.2f} s ({how})"


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


def output_console(stderr: bool = False) -> Console:
    """The terminal's width on a terminal; when output goes to a file or a pipe (nohup, CI logs,
    `| less`) rich would assume 80 columns and squeeze table columns out: use 140 instead,
    unless COLUMNS says otherwise.

    Markup is off: our messages quote paths, pip extras (`[openai]`), masked keys
    (`[redacted]`) and user input, and Rich would take any `[word]` in them for a style tag and
    drop it. Styling goes through Text and style= instead."""
    console = Console(stderr=stderr, markup=False)
    if not console.is_terminal and "COLUMNS" not in os.environ:
        console = Console(stderr=stderr, width=140, markup=False)
    return console


def error_text(message: str) -> Text:
    """`error: message`, the prefix in bold red and the message exactly as given."""
    return Text.assemble(("error:", "bold red"), " ", message)
