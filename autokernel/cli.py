"""The `autokernel` command line: thin commands over the library, errors turned into messages."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated

import typer

from autokernel import DISTRIBUTION, __version__, backends, option_checks
from autokernel.harness.sandbox import (
    BACKENDS,
    DEFAULT_TIMEOUT_S,
    KernelFileError,
    Options,
    evaluate,
)
from autokernel.harness.verdict import Status
from autokernel.render import error_text, output_console
from autokernel.run import layout
from autokernel.secrets import redact
from autokernel.specs import SPECS, dtype_name, parse_dtype

app = typer.Typer(
    help="Make a PyTorch model's GPU kernels faster overnight: profile, optimize, verify.",
    no_args_is_help=True,
    add_completion=True,  # --install-completion / --show-completion for bash, zsh, fish, pwsh
    pretty_exceptions_enable=False,
    rich_markup_mode="markdown",  # reflows docstring paragraphs instead of keeping line breaks
    context_settings={"help_option_names": ["-h", "--help"]},  # inherited by every command
)
console = output_console()
err = output_console(stderr=True)


def _print_version(asked: bool) -> None:
    if asked:
        console.print(f"autokernel {__version__} ({DISTRIBUTION})", highlight=False)
        raise typer.Exit(0)


@app.callback()
def _root(
    version: Annotated[
        bool,
        typer.Option(
            "--version", is_eager=True, callback=_print_version, help="Print the version and exit."
        ),
    ] = False,
) -> None:
    """autokernel: profile a model, optimize its kernels overnight, verify the result."""


def fail(message: str, code: int = 2) -> typer.Exit:
    err.print(error_text(redact(message)), soft_wrap=True)
    return typer.Exit(code)


@app.command()
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
    with console.status(f"evaluating {file} in a sandboxed worker…") as status:
        try:
            verdict = evaluate(
                file, opts, on_phase=lambda p: status.update(f"evaluating {file}: {p}…")
            )
        except KernelFileError as exc:
            raise fail(str(exc)) from None
    from autokernel.render import verdict_view

    console.print(verdict_view(verdict))
    if json_out:
        try:
            json_out.write_text(redact(json.dumps(verdict.to_json(), indent=2)))
        except OSError as exc:
            raise fail(f"cannot write the verdict to {json_out}: {exc}") from None
        console.print(f"verdict written to {json_out}", style="dim")
    raise typer.Exit(0 if verdict.status is Status.PASS else 1)


@app.command()
def gpu(
    measure: Annotated[
        bool, typer.Option("--measure", help="Re-measure this machine's ceilings now.")
    ] = False,
) -> None:
    """Print the GPU table (datasheet peaks), this machine's GPU, and its measured ceilings
    (copy bandwidth, bf16 matmul rate; measured once and cached). % of peak uses the measured
    ceiling when there is one."""
    from autokernel import gpu as gpus
    from autokernel.render import gpu_table, machine_view

    console.print(gpu_table(gpus.table_rows()))
    detected = gpus.detect()
    ceilings = None
    if detected is not None:
        with console.status("measuring this GPU's copy bandwidth and matmul rate…"):
            ceilings = gpus.load_or_measure(force=measure)
    console.print(machine_view(detected, ceilings))


@app.command()
def run(
    hours: Annotated[
        float | None, typer.Option(help="Time budget for the whole night (default 10).")
    ] = None,
    kernel: Annotated[
        str | None,
        typer.Option("--kernel", "-k", help="Optimize one kernel type, without a plan.yaml."),
    ] = None,
    shape: Annotated[
        list[str] | None,
        typer.Option(help="A real shape for --kernel, e.g. 4096x50257 (repeatable)."),
    ] = None,
    dtype: Annotated[
        str | None, typer.Option(help="Benchmark dtype (default bfloat16 on GPU, float32 on CPU).")
    ] = None,
    plan: Annotated[
        Path | None, typer.Option(help="Targets file (default: plan.yaml in the workspace).")
    ] = None,
    agent: Annotated[
        str | None,
        typer.Option(help="tuner (built in, default), openai, anthropic or command."),
    ] = None,
    llm_model: Annotated[
        str | None, typer.Option(help="Model name for openai/anthropic, e.g. gpt-5.")
    ] = None,
    base_url: Annotated[
        str | None,
        typer.Option(
            help="OpenAI-compatible server (vLLM, Ollama, ...); default: the SDK's own "
            "environment variable."
        ),
    ] = None,
    agent_command: Annotated[
        str | None,
        typer.Option(help="For --agent command: a program reading the prompt on stdin."),
    ] = None,
    max_experiments: Annotated[
        int | None, typer.Option(help="Stop after this many experiments (this invocation).")
    ] = None,
    max_tokens: Annotated[
        int | None, typer.Option(help="Stop when the night's LLM tokens reach this.")
    ] = None,
    quiet: Annotated[
        bool, typer.Option("--quiet", "-q", help="One plain line per experiment (for nohup).")
    ] = False,
    resume: Annotated[
        bool, typer.Option(help="Continue the workspace's run after Ctrl-C, kill or reboot.")
    ] = False,
    workspace: Annotated[
        Path, typer.Option("--workspace", "-w", help="Directory of the run (a git repo).")
    ] = Path("."),
    tag: Annotated[
        str | None, typer.Option(help="Branch name autokernel/TAG (default: date-time).")
    ] = None,
    timeout: Annotated[
        float | None, typer.Option(help="Wall-clock limit per evaluation, seconds.")
    ] = None,
    quick: Annotated[
        bool, typer.Option(help="Fewer sweep sizes and one benchmark size per evaluation.")
    ] = False,
    compile_baseline: Annotated[
        bool | None,
        typer.Option("--compile/--no-compile", help="Time torch.compile (default: on a GPU)."),
    ] = None,
    mode: Annotated[
        str | None,
        typer.Option(
            help="Baseline the night ranks targets against: eager or compile (default: compile "
            "on a GPU, eager on the CPU). Kept by --resume."
        ),
    ] = None,
    backend: Annotated[
        str | None,
        typer.Option(
            help="Kernel backend: triton (default), cuda (CUDA C++ starters, needs a GPU) or any "
            "(LLM agents may switch a target's backend). Kept by --resume."
        ),
    ] = None,
    unsafe_no_sandbox: Annotated[
        bool,
        typer.Option(
            "--unsafe-no-sandbox",
            help="Let an LLM agent run where no sandbox is available: its kernels run with "
            "your user's rights.",
        ),
    ] = False,
    workers: Annotated[
        int | None,
        typer.Option(
            help="Evaluate N candidates at once, one per GPU of this machine (on a CPU: N "
            "interpreter processes). Kept by --resume."
        ),
    ] = None,
    ray_address: Annotated[
        str | None,
        typer.Option(
            help="Evaluate on an existing Ray cluster (auto, HOST:PORT or ray://HOST:PORT), "
            "one GPU per candidate; --workers caps how many. Needs pip install "
            "'autokernel[ray]'."
        ),
    ] = None,
) -> None:
    """The overnight loop: an agent edits kernel.py, the harness checks and times it, the change
    is kept or reverted. One git commit per experiment on branch autokernel/TAG, one row per
    experiment in results.tsv, state in .autokernel/. Ctrl-C stops after the current experiment;
    `--resume` continues. Without a GPU it runs the Triton interpreter at small sizes."""
    from autokernel.session import RunRequest, SessionError, execute, prepare, summary

    req = RunRequest(
        workspace=workspace, hours=hours, kernel=kernel, shapes=shape or [], dtype=dtype,
        plan=plan, agent=agent, llm_model=llm_model, base_url=base_url,
        agent_command=agent_command, max_experiments=max_experiments, max_tokens=max_tokens,
        quiet=quiet, resume=resume, tag=tag, timeout_s=timeout, quick=quick,
        compile_baseline=compile_baseline, mode=mode, unsafe_no_sandbox=unsafe_no_sandbox,
        workers=workers, ray_address=ray_address,
        backend=backend,
    )  # fmt: skip
    problem = option_checks.run_error(hours, max_experiments, max_tokens, timeout, workspace, plan,
                                      workers, ray_address)  # fmt: skip
    if problem:
        raise fail(problem)
    try:
        loop, view = prepare(req)
        outcome = execute(loop, view, resume)
    except SessionError as exc:
        raise fail(str(exc)) from None
    for line in summary(outcome, req.workspace):
        console.print(line, highlight=False, markup=False, soft_wrap=True)
    if outcome.error:
        raise fail(outcome.error, outcome.code)
    raise typer.Exit(outcome.code)


@app.command()
def status(
    workspace: Annotated[
        Path, typer.Option("--workspace", "-w", help="Directory of the run.")
    ] = Path("."),
) -> None:
    """Where the workspace's run stands: per target, experiments, best speed, why it moved on."""
    from autokernel import orchestrate
    from autokernel.run import state as run_state

    problem = option_checks.status_error(workspace)
    if problem:
        raise fail(problem)
    try:
        state = run_state.load(workspace)
    except ValueError as exc:
        raise fail(str(exc), 1) from None
    if state is None:
        raise fail(f"no run in {workspace.resolve()}: start one with `autokernel run`", 1)
    for line in orchestrate.status_lines(state):
        console.print(line, highlight=False, markup=False, soft_wrap=True)


# Commands whose options live with their implementation; registered here so `autokernel --help`
# lists them in the order a user meets them.
from autokernel.profile_view import profile_command  # noqa: E402
from autokernel.report_cli import report_command  # noqa: E402
from autokernel.verify_cli import verify_command  # noqa: E402

app.command("profile")(profile_command)
app.command("verify")(verify_command)
app.command("report")(report_command)


def main() -> None:
    app()


if __name__ == "__main__":
    main()
