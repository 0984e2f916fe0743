"""`autokernel profile`: load the model, profile it, write plan.yaml, show the table."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from autokernel.cli.errors import fail, handled
from autokernel.model.profiling.profiler import ITERS, WARMUP, add_compiled, run_profile, write_plan
from autokernel.run import layout
from autokernel.views.console import output_console
from autokernel.views.profile import profile_view


def profile_command(
    file: Annotated[
        Path | None, typer.Argument(help="Model file (KernelBench convention: Model, get_inputs).")
    ] = None,
    class_name: Annotated[
        str | None,
        typer.Option("--class", help="Model class in FILE, or package.module.Class."),
    ] = None,
    input_shape: Annotated[
        str | None, typer.Option(help="Input shape for --class/--hf-config, e.g. 2x128.")
    ] = None,
    hf_config: Annotated[
        str | None, typer.Option(help="Hugging Face config name or config.json (no weights).")
    ] = None,
    dtype: Annotated[
        str | None, typer.Option(help="Model dtype (default bfloat16 on GPU, float32 on CPU).")
    ] = None,
    device: Annotated[str | None, typer.Option(help="cpu, cuda or cuda:N.")] = None,
    iters: Annotated[int, typer.Option(min=1, help="Profiled forwards.")] = ITERS,
    warmup: Annotated[int, typer.Option(min=0, help="Forwards before profiling.")] = WARMUP,
    out: Annotated[Path, typer.Option(help="Where to write the plan.")] = layout.PLAN,
    trace: Annotated[Path | None, typer.Option(help="Also write a Chrome trace here.")] = None,
    compile_model: Annotated[
        bool | None,
        typer.Option(
            "--compile/--no-compile",
            help="Also time and profile torch.compile of the model (default: on a GPU).",
        ),
    ] = None,
) -> None:
    """Profile a model: ranked table of kernel time with Amdahl what-ifs; writes plan.yaml."""
    from autokernel.model.loading import ModelSource, load_model, parse_input_shape

    console = output_console()
    with handled():
        shape = parse_input_shape(input_shape) if input_shape else None
        src = ModelSource(file, class_name, shape, hf_config, dtype, device)
        with console.status("loading the model…"):
            loaded = load_model(src)
        with console.status(f"profiling {iters} forwards after {warmup} warm-up…"):
            prof = run_profile(loaded, iters=iters, warmup=warmup, trace=trace)
        if compile_model if compile_model is not None else loaded.device.type == "cuda":
            with console.status("compiling the model and profiling it again…"):
                add_compiled(prof, loaded, iters=iters, warmup=warmup)
    console.print(profile_view(prof))
    if not prof.targets:
        raise fail("no kernel targets found; plan not written")
    write_plan(prof, out)
    console.print(f"plan written to {out} ({len(prof.targets)} targets)", style="dim")
    if trace is not None:
        console.print(f"Chrome trace written to {trace}", style="dim")
