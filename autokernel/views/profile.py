"""A Profile drawn for `autokernel profile`: the ranked table with its Amdahl what-ifs, the
no-double-counting check and the torch.compile line (the command is autokernel/cli/profile.py).
"""

from __future__ import annotations

from rich import box
from rich.console import Group
from rich.table import Table
from rich.text import Text

from autokernel.model.profiling.profile import Profile, Row
from autokernel.specs import GENERIC, get_spec

SHOWN_OTHER = 15  # 'other' rows printed; the plan keeps all of them
COL_WHAT = "target shape args / modules"  # the one column that wraps


def _shape(row: Row) -> str:
    if row.kind == GENERIC:
        return str(row.args.get("inputs", ""))  # the tensors as the model passed them
    if not row.is_target or not row.shape:
        return ""
    return get_spec(row.kind).label(row.shape)


def _kind(row: Row) -> str:
    if row.kind == GENERIC and row.is_target:
        return f"generic: {row.name}"
    return row.kind if row.is_target else f"other: {row.name}"


def _args(row: Row) -> str:
    return ", ".join(
        f"{k}={v:g}" if isinstance(v, float) else f"{k}={v}"
        for k, v in row.args.items()
        if k != "inputs"  # a generic row's: shown as its shape
    )


def _gain(x: float) -> str:
    return "∞" if x == float("inf") else f"{x:.2f}x"


def _what(row: Row, model_dtype: str) -> Text:
    """The target (or op), its shape, its dtype where it differs from the model's (the title
    names the model's), its arguments; on the next line the modules it runs in. Shapes and
    module lists are long: in columns of their own they left the figures no room at 100."""
    parts = [_kind(row)]
    if _shape(row):
        parts.append(_shape(row))
    if row.dtype and row.dtype != model_dtype:
        parts.append(row.dtype)
    if _args(row):
        parts.append(_args(row))
    text = Text(" ".join(parts))
    if row.where:
        text.append("\n" + ", ".join(row.where), "dim")
    if row.why and not row.is_target:
        text.append("\n" + row.why, "yellow")
    return text


def profile_table(prof: Profile) -> Table:
    """Readable at 100 columns: figures never wrap and no cell is cut short (the target column
    wraps instead); no vertical rules take up width."""
    unit = "CUDA kernel time" if prof.device == "cuda" else "CPU time"
    t = Table(title=f"{prof.model}: {unit} per forward, {prof.dtype}", title_justify="left",
              box=box.SIMPLE_HEAD, pad_edge=False, collapse_padding=True)  # fmt: skip
    t.add_column("#", justify="right", no_wrap=True)
    t.add_column(COL_WHAT, overflow="fold", min_width=16)
    for col in ("ms", "%", "cum %", "calls", "2x →", "free →"):
        t.add_column(col, justify="right", no_wrap=True)
    cum, other_shown = 0.0, 0
    for i, r in enumerate(prof.rows, 1):
        cum += r.share
        if not r.is_target:
            other_shown += 1
            if other_shown > SHOWN_OTHER:
                continue
        t.add_row(
            str(i), _what(r, prof.dtype), f"{r.ms:.3f}", f"{100 * r.share:.1f}",
            f"{100 * cum:.1f}", str(r.calls), _gain(r.amdahl(2.0)), _gain(r.amdahl(float("inf"))),
            style=None if r.is_target else "dim",
        )  # fmt: skip
    if prof.overhead_ms > 0:
        share = prof.overhead_ms / prof.total_ms if prof.total_ms else 0.0
        t.add_row("", "python overhead, between ops", f"{prof.overhead_ms:.3f}",
                  f"{100 * share:.1f}", "", "", "", "", style="dim")  # fmt: skip
    return t


def check_line(prof: Profile) -> Text:
    """The no-double-counting check, stated with its numbers."""
    what = "kernel time" if prof.device == "cuda" else "forward CPU time"
    ok = prof.consistent
    text = Text(
        f"check: attributed {prof.attributed_ms:.3f} ms (rows + overhead, self times) vs "
        f"{what} {prof.total_ms:.3f} ms vs profiler self-time total "
        f"{prof.profiler_total_ms:.3f} ms: {'consistent' if ok else 'MISMATCH'}; "
        f"wall {prof.wall_ms:.3f} ms per forward over {prof.iterations} iterations",
        "green" if ok else "bold red",
    )
    return text


def profile_view(prof: Profile) -> Group:
    from autokernel import gpu
    from autokernel.views.gpu import machine_view

    parts: list = [machine_view(gpu.detect(), None)]
    if prof.device != "cuda":
        parts.append(Text("no CUDA: CPU time (self CPU time of aten ops)", "yellow"))
    parts += [profile_table(prof), check_line(prof), compile_line(prof)]
    parts += [Text(f"note: {n}", "yellow") for n in prof.notes]
    return Group(*parts)


def compile_line(prof: Profile) -> Text:
    """The compiled model beside the eager one: what a kernel must beat in compile mode."""
    c = prof.compiled
    if c is None:
        return Text(prof.compile_note or "torch.compile not measured (--compile)", "dim")
    return Text(
        f"torch.compile: forward {c.compile_forward_ms:.3f} ms vs eager {c.eager_forward_ms:.3f} "
        f"ms ({c.eager_forward_ms / c.compile_forward_ms:.2f}x); profiled total "
        f"{c.compile_total_ms:.3f} vs {c.eager_total_ms:.3f} ms (ratio {c.ratio:.3f})",
        "dim",
    )
