"""`autokernel run` (the overnight loop) and `autokernel status` (where a run stands)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from autokernel import option_checks
from autokernel.cli.errors import EXIT_NO, fail, handled
from autokernel.run.state import load
from autokernel.views.console import output_console
from autokernel.views.status import status_lines


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
        typer.Option(
            help="A real shape for --kernel, e.g. 4096x50257, or name=value pairs, which also "
            "set attention's causal=0|1 and mask=0|1|2 (repeatable)."
        ),
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
    new: Annotated[
        bool,
        typer.Option(
            "--new",
            help="Start a new run even though the workspace's run is unfinished (that run "
            "keeps its branch and rows, but can no longer be resumed).",
        ),
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
            "'torch-autokernel[ray]'."
        ),
    ] = None,
) -> None:
    """The overnight loop: an agent edits kernel.py, the harness checks and times it, the change
    is kept or reverted. One git commit per experiment on branch autokernel/TAG, one row per
    experiment in results.tsv, state in .autokernel/. Ctrl-C stops after the current experiment;
    `--resume` continues. Without a GPU it runs the Triton interpreter at small sizes."""
    from autokernel.session import RunRequest, execute, prepare, summary

    req = RunRequest(
        workspace=workspace, hours=hours, kernel=kernel, shapes=shape or [], dtype=dtype,
        plan=plan, agent=agent, llm_model=llm_model, base_url=base_url,
        agent_command=agent_command, max_experiments=max_experiments, max_tokens=max_tokens,
        quiet=quiet, resume=resume, new=new, tag=tag, timeout_s=timeout, quick=quick,
        compile_baseline=compile_baseline, mode=mode, unsafe_no_sandbox=unsafe_no_sandbox,
        workers=workers, ray_address=ray_address,
        backend=backend,
    )  # fmt: skip
    problem = option_checks.run_error(hours, max_experiments, max_tokens, timeout, workspace, plan,
                                      workers, ray_address, tag, resume and new)  # fmt: skip
    if problem:
        raise fail(problem)
    with handled():
        loop, view = prepare(req)
        outcome = execute(loop, view, resume)
    console = output_console()
    for line in summary(outcome, req.workspace):
        console.print(line, highlight=False, markup=False, soft_wrap=True)
    if outcome.error:
        raise fail(outcome.error, outcome.code)
    raise typer.Exit(outcome.code)


def status(
    workspace: Annotated[
        Path, typer.Option("--workspace", "-w", help="Directory of the run.")
    ] = Path("."),
) -> None:
    """Where the workspace's run stands: per target, experiments, best speed, why it moved on."""
    problem = option_checks.status_error(workspace)
    if problem:
        raise fail(problem)
    with handled():
        state = load(workspace)
    if state is None:
        raise fail(f"no run in {workspace.resolve()}: start one with `autokernel run`", EXIT_NO)
    console = output_console()
    for line in status_lines(state):
        console.print(line, highlight=False, markup=False, soft_wrap=True)
