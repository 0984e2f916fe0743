"""`autokernel verify`'s result drawn: the verdict first, then calls per kernel type, outputs,
every mode's time, the kernel selection and the notes."""

from __future__ import annotations

from rich.console import Console
from rich.table import Table
from rich.text import Text

from autokernel.model.verify.outputs import EAGER, REFERENCE, REFERENCE_FACTOR
from autokernel.model.verify.verifier import VerifyResult
from autokernel.views.console import error_text


def render(result: VerifyResult, console: Console) -> None:
    """The verdict first, then calls per kernel type, outputs, timings, selection and notes."""
    verdict = ("PASS", "bold green") if result.ok else ("FAIL", "bold red")
    console.print(Text.assemble(verdict, f" {result.model} on {result.device}, {result.dtype}"))
    calls = Table("type", "kernel calls", "fallbacks", "sites", "fallback reasons")
    for kind, c in result.calls.items():
        why = "; ".join(f"{r} ({n}x)" for r, n in c["fallback_reasons"].items())
        calls.add_row(kind, str(c["kernel"]), str(c["fallback"]), str(c["sites"]), why)
    console.print(calls)
    outs = Table("output", "dtype", "rule", "error", "tolerance", "eager's", "margin", "")
    for o in result.outputs:
        eager = "-" if o.eager_error is None else f"{o.eager_error:.3g}"
        outs.add_row(o.name, o.dtype, o.rule, f"{o.error:.3g}", f"{o.tolerance:.3g}", eager,
                     f"{o.margin:.3g}x", "ok" if o.ok else Text("MISMATCH", "red"))  # fmt: skip
    console.print(outs)
    rules = {o.rule for o in result.outputs}
    if REFERENCE in rules:
        console.print(f"  {REFERENCE}: ||patched - fp32|| / ||fp32|| within "
                      f"max({REFERENCE_FACTOR:g} x eager's own distance, one rounding); "
                      "margin: tolerance / error")  # fmt: skip
    if EAGER in rules:
        console.print("  eager: max|patched - eager| / max(1, max|eager|) within the dtype's "
                      "harness atol x the accumulation factor")  # fmt: skip
    _render_modes(result, console)
    _render_selection(result, console)
    if result.predicted_speedup is not None:
        console.print(
            f"  Amdahl prediction from the kernels' speedups: {result.predicted_speedup:.2f}x"
        )
    for p in result.predictions:
        state = ("holds", "") if p["holds"] else ("missed", "red")
        console.print(Text.assemble(
            f"  predicted {p['mode']} from {p['source']}: {p['predicted_ms']:.3f} ms, "
            f"measured {p['measured_ms']:.3f} ms ({p['miss']:+.0%}, ", state, ")"
        ))  # fmt: skip
        if p["message"]:
            console.print(f"  {p['message']}", markup=False, highlight=False)
    for e in result.errors:
        console.print(error_text(e), highlight=False)
    for n in result.notes:
        console.print(f"note: {n}", markup=False, highlight=False)


def _render_modes(result: VerifyResult, console: Console) -> None:
    if not result.modes:
        return
    console.print(f"time ({result.clock}), your mode: {result.mode}")
    table = Table("mode", "ms (median)", "spread", "vs eager", "kernels")
    eager = result.ms("eager")
    for m, t in result.modes.items():
        x = f"{eager / t['ms']:.2f}x" if eager and t["ms"] else "-"
        best = (" (best)", "bold") if m == result.best_mode else ""
        table.add_row(Text.assemble(m, best), f"{t['ms']:.3f}", f"±{t['spread']:.1%}", x,
                      ", ".join(t["kernels"]) or "-")  # fmt: skip
    console.print(table)
    for label, base in (("eager", result.eager_ms), ("torch.compile", result.compile_ms)):
        x = result.speedup(base)
        if x is not None:
            console.print(f"  speedup vs {label}: {x:.2f}x")
    if result.best_mode:
        console.print(f"  best mode: {result.best_mode}")
    breaks = {k: v for k, v in result.graph_breaks.items() if not k.endswith("reasons")}
    if breaks:
        console.print("  graph breaks: " + ", ".join(f"{k} {v}" for k, v in breaks.items()))


def _render_selection(result: VerifyResult, console: Console) -> None:
    sel = result.selection
    if not sel:
        return
    console.print(f"kernel selection in {sel['mode']} mode ({sel['timings']} forwards timed):")
    table = Table("target", "expected (kernel figures)", "measured (whole model)", "decision")
    for t in sel["candidates"]:
        e = (sel.get("kept_effects") or {}).get(t) or sel["effects"].get(t)  # kept set's first
        exp = result.expected.get(t)
        decision = "kept" if t in sel["kept"] else f"dropped: {sel['dropped'].get(t, '')}"
        table.add_row(
            t, f"{exp:.2f}x" if exp else "-", f"{e['ratio']:.2f}x" if e else "-", decision
        )
    console.print(table)
    for m, kept in result.kept.items():
        console.print(f"  helps in {m} mode: {', '.join(kept) or 'none'}")
