"""A verdict drawn for `autokernel bench`: status, device, the five stages, the timings."""

from __future__ import annotations

from rich.console import Group
from rich.text import Text

from autokernel.harness.verdict import Status, Verdict
from autokernel.views.console import compact_table

STATUS_STYLE = {
    Status.PASS: "bold green",
    Status.FAIL: "bold red",
    Status.CRASH: "bold magenta",
    Status.TIMEOUT: "bold yellow",
    Status.REJECTED: "bold red",
}


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
