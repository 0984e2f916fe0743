"""`autokernel verify`: the optimized kernels put into the model, one call to
autokernel.model.verify.verifier, the result drawn by views/verify.py."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated

import typer

from autokernel.cli.errors import fail, handled
from autokernel.mode import parse_mode
from autokernel.model.kernel_ops import Policy
from autokernel.model.verify.ablation import ROUNDS
from autokernel.model.verify.verifier import VerifyError, verify_workspace
from autokernel.views.console import output_console
from autokernel.views.verify import render


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
        bool,
        typer.Option(
            help="Also time the model captured in a CUDA graph, plain and patched, eager and "
            "compiled (compile+cuda-graphs is torch.compile's reduce-overhead): each patched "
            "capture is judged against the same capture without our kernels.",
        ),
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
        from autokernel.model.loading import ModelSource, parse_input_shape
    except ImportError as exc:
        raise fail(f"cannot load models: {exc}") from None
    with handled():
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
    render(result, output_console())
    if json_out:
        try:
            json_out.write_text(json.dumps(result.to_json(), indent=2) + "\n")
        except OSError as exc:
            raise fail(f"cannot write {json_out}: {exc}") from None
    raise typer.Exit(0 if result.ok else 1)
