"""The Typer application every command is registered on, and the options of the bare
`autokernel` (--version, -h)."""

from __future__ import annotations

from typing import Annotated

import typer

from autokernel import DISTRIBUTION, __version__
from autokernel.views.console import output_console

app = typer.Typer(
    help="Make a PyTorch model's GPU kernels faster overnight: profile, optimize, verify.",
    no_args_is_help=True,
    add_completion=True,  # --install-completion / --show-completion for bash, zsh, fish, pwsh
    pretty_exceptions_enable=False,
    rich_markup_mode="markdown",  # reflows docstring paragraphs instead of keeping line breaks
    context_settings={"help_option_names": ["-h", "--help"]},  # inherited by every command
)


def _print_version(asked: bool) -> None:
    if asked:
        output_console().print(f"autokernel {__version__} ({DISTRIBUTION})", highlight=False)
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
