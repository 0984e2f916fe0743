"""`autokernel bench` (one kernel file, checked and timed) and `autokernel gpu` (the GPU table
and this machine's ceilings)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated

import typer

from autokernel import backends, option_checks
from autokernel.cli.errors import fail, handled
from autokernel.harness.sandbox import BACKENDS, DEFAULT_TIMEOUT_S, Options, evaluate
from autokernel.harness.verdict import Status
from autokernel.run import layout
from autokernel.secrets import redact
from autokernel.specs import SPECS, dtype_name, parse_dtype
from autokernel.views.console import output_console
from autokernel.views.gpu import gpu_table, machine_view
from autokernel.views.verdict import verdict_view


def bench(
    file: Annotated[
        Path | None, typer.Argument(help="Kernel file to evaluate (default: ./kernel.py).")
    ] = None,
    kernel: Annotated[
        str | None,
        typer.Option("--kernel", "-k", help="Evaluate the shipped starter of this kernel type."),
    ] = None,
    quick: Annotated[
        bool, typer.Option(help="Fewer sweep sizes, one benchmark size, no torch.compile.")
    ] = False,
    json_out: Annotated[
        Path | None, typer.Option("--json", help="Also write the verdict JSON here.")
    ] = None,
    timeout: Annotated[
        float, typer.Option(help="Wall-clock limit for the candidate, seconds.")
    ] = DEFAULT_TIMEOUT_S,
    seed: Annotated[int | None, typer.Option(help="Seed for the inputs (default: random).")] = None,
    dtype: Annotated[
        str | None, typer.Option(help="Benchmark dtype (default bfloat16 on GPU, float32 on CPU).")
    ] = None,
    compile_baseline: Annotated[
        bool, typer.Option("--compile/--no-compile", help="Time torch.compile as a baseline.")
    ] = True,
    backend: Annotated[
        str,
        typer.Option(help="With --kernel: the starter's backend, triton or cuda (CUDA C++)."),
    ] = "triton",
) -> None:
    """Check a kernel in five stages (smoke, shape sweep, adversarial, determinism, odd sizes),
    then time it against eager PyTorch and torch.compile. Runs in a sandboxed subprocess; on a
    machine without CUDA it uses the Triton interpreter at small sizes. Exit code 0 only on PASS.
    """
    problem = option_checks.bench_error(timeout, json_out)
    if problem:
        raise fail(problem)
    if backend not in BACKENDS:
        raise fail(f"--backend {backend!r}: choose triton or cuda")
    if kernel is not None:
        if kernel not in SPECS:
            raise fail(f"unknown kernel type {kernel!r}; choose one of: {', '.join(SPECS)}")
        if file is not None:
            raise fail("give a FILE or --kernel, not both")
        file = backends.starter_path(kernel, backend)
        if not file.exists():
            raise fail(f"no {backend} starter for {kernel} (kernels/cuda/ has none); use "
                       "--backend triton")  # fmt: skip
    if dtype is not None:
        try:
            dtype = dtype_name(parse_dtype(dtype))
        except ValueError as exc:
            raise fail(str(exc)) from None
    file = file or layout.KERNEL
    if not file.exists():
        raise fail(
            f"{file}: no such file. Pass a kernel file, or --kernel TYPE for a shipped starter "
            f"({', '.join(SPECS)})."
        )
    problem = option_checks.backend_error(file)
    if problem:
        raise fail(problem)
    opts = Options(
        timeout_s=timeout, seed=seed, quick=quick, dtype=dtype,
        compile_baseline=compile_baseline and not quick,
        prestart=False,  # one evaluation: a spare for a next one would be wasted work
    )  # fmt: skip
    console = output_console()
    with console.status(f"evaluating {file} in a sandboxed worker…") as status, handled():
        verdict = evaluate(file, opts, on_phase=lambda p: status.update(f"evaluating {file}: {p}…"))

    console.print(verdict_view(verdict))
    if json_out:
        try:
            json_out.write_text(redact(json.dumps(verdict.to_json(), indent=2)))
        except OSError as exc:
            raise fail(f"cannot write the verdict to {json_out}: {exc}") from None
        console.print(f"verdict written to {json_out}", style="dim")
    raise typer.Exit(0 if verdict.status is Status.PASS else 1)


def gpu(
    measure: Annotated[
        bool, typer.Option("--measure", help="Re-measure this machine's ceilings now.")
    ] = False,
) -> None:
    """Print the GPU table (datasheet peaks), this machine's GPU, and its measured ceilings
    (copy bandwidth, bf16 matmul rate; measured once and cached). % of peak uses the measured
    ceiling when there is one."""
    from autokernel import gpu as gpus

    console = output_console()
    console.print(gpu_table(gpus.table_rows()))
    detected = gpus.detect()
    ceilings = None
    if detected is not None:
        with console.status("measuring this GPU's copy bandwidth and matmul rate…"):
            ceilings = gpus.load_or_measure(force=measure)
    console.print(machine_view(detected, ceilings))
