"""The `autokernel verify` command: options in, one call to autokernel.verify, the result shown."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console
from rich.table import Table
from rich.text import Text

from autokernel.ablation import ROUNDS
from autokernel.kernel_ops import Policy
from autokernel.mode import ModeError, parse_mode
from autokernel.render import error_text, output_console
from autokernel.verify import VerifyError, VerifyResult, verify_workspace


def verify_command(
    model_file: Annotated[
        Path | None, typer.Argument(help="Model file (KernelBench convention).")
    ] = None,
    workspace: Annotated[Path, typer.Option("--workspace", "-w", help="Run directory.")] = Path(),
    class_name: Annotated[str | None, typer.Option("--class", help="Model class to build.")] = None,
    input_shape: Annotated[
        str | None, typer.Option(help="Input shape for --class, e.g. 2x128.")
    ] = None,
    hf_config: Annotated[
        str | None, typer.Option(help="Hugging Face config name or file (no weights).")
    ] = None,
    dtype: Annotated[str | None, typer.Option(help="Model dtype (default bf16 on GPU).")] = None,
    device: Annotated[str | None, typer.Option(help="cuda or cpu (default: cuda if any).")] = None,
    mode: Annotated[
        str | None,
        typer.Option(help="Your baseline: eager or compile (default: compile on a GPU)."),
    ] = None,
    plan_shapes_only: Annotated[
        bool, typer.Option(help="Run kernels only at the plan's shapes; PyTorch elsewhere.")
    ] = False,
    compile_baseline: Annotated[
        bool, typer.Option("--compile/--no-compile", help="Also time the torch.compile modes.")
    ] = True,
    cuda_graphs: Annotated[
        bool, typer.Option(help="Also time the patched model captured in a CUDA graph.")
    ] = False,
    select: Annotated[
        bool | None,
        typer.Option(
            "--select/--no-select",
            help="Keep only kernels that make the whole forward faster (default: on a GPU).",
        ),
    ] = None,
    rounds: Annotated[int, typer.Option(help="Interleaved timing rounds per mode.")] = ROUNDS,
    keep_slower: Annotated[
        bool,
        typer.Option(help="On a GPU, also use kernels whose best was slower than eager."),
    ] = False,
    json_out: Annotated[Path | None, typer.Option("--json", help="Write the result here.")] = None,
) -> None:
    """Put the optimized kernels into the model: outputs vs eager, calls, every mode's time."""
    try:
        from autokernel.model_input import ModelInputError, ModelSource, parse_input_shape
    except ImportError as exc:
        typer.echo(f"error: cannot load models: {exc}", err=True)
        raise typer.Exit(2) from None
    try:
        # --no-compile alone means an eager baseline; with an explicit --mode compile it is a
        # contradiction, reported below.
        user_mode = parse_mode(mode, device) if mode or compile_baseline else "eager"
        if rounds < 1:
            raise VerifyError(f"--rounds {rounds}: give at least 1")
        if user_mode == "compile" and not compile_baseline:
            raise VerifyError("--mode compile needs the compile modes: drop --no-compile")
        shape = parse_input_shape(input_shape) if input_shape else None
        source = ModelSource(path=model_file, class_name=class_name, input_shape=shape,
                             hf_config=hf_config, dtype=dtype, device=device)  # fmt: skip
        policy: Policy = "plan" if plan_shapes_only else "dtype"
        result = verify_workspace(
            source, workspace, policy=policy, with_compile=compile_baseline,
            keep_slower=keep_slower, mode=user_mode, select=select, cuda_graphs=cuda_graphs,
            rounds=rounds,
        )  # fmt: skip
    except (VerifyError, ModelInputError, ModeError) as exc:
        typer.echo(f"error: {exc}", err=True)
        raise typer.Exit(2) from None
    render(result, output_console())
    if json_out:
        try:
            json_out.write_text(json.dumps(result.to_json(), indent=2) + "\n")
        except OSError as exc:
            typer.echo(f"error: cannot write {json_out}: {exc}", err=True)
            raise typer.Exit(2) from None
    raise typer.Exit(0 if result.ok else 1)


def render(result: VerifyResult, console: Console) -> None:
    """The verdict first, then calls per kernel type, outputs, timings, selection and notes."""
    verdict = ("PASS", "bold green") if result.ok else ("FAIL", "bold red")
    console.print(Text.assemble(verdict, f" {result.model} on {result.device}, {result.dtype}"))
    calls = Table("type", "kernel calls", "fallbacks", "sites", "fallback reasons")
    for kind, c in result.calls.items():
        why = "; ".join(f"{r} ({n}x)" for r, n in c["fallback_reasons"].items())
        calls.add_row(kind, str(c["kernel"]), str(c["fallback"]), str(c["sites"]), why)
    console.print(calls)
    outs = Table("output", "dtype", "error (rel. to scale)", "tolerance", "")
    for o in result.outputs:
        outs.add_row(o.name, o.dtype, f"{o.error:.3g}", f"{o.tolerance:.3g}",
                     "ok" if o.ok else Text("MISMATCH", "red"))  # fmt: skip
    console.print(outs)
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
        e = sel["effects"].get(t)
        exp = result.expected.get(t)
        decision = "kept" if t in sel["kept"] else f"dropped: {sel['dropped'].get(t, '')}"
        table.add_row(
            t, f"{exp:.2f}x" if exp else "-", f"{e['ratio']:.2f}x" if e else "-", decision
        )
    console.print(table)
    for m, kept in result.kept.items():
        console.print(f"  helps in {m} mode: {', '.join(kept) or 'none'}")
