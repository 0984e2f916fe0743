"""The consoles the commands print to, and the pieces every view shares: the error line and
the compact table that keeps ten figure columns within 100."""

from __future__ import annotations

import os

from rich import box
from rich.console import Console
from rich.table import Table
from rich.text import Text


def compact_table(title: str) -> Table:
    """A table without vertical rules or edge padding: ten figure columns fit in 100 columns."""
    return Table(title=title, title_justify="left", box=box.SIMPLE_HEAD, pad_edge=False,
                 collapse_padding=True)  # fmt: skip


def output_console(stderr: bool = False) -> Console:
    """The terminal's width on a terminal; when output goes to a file or a pipe (nohup, CI logs,
    `| less`) rich would assume 80 columns and squeeze table columns out: use 140 instead,
    unless COLUMNS says otherwise.

    Markup is off: our messages quote paths, pip extras (`[openai]`), masked keys
    (`[redacted]`) and user input, and Rich would take any `[word]` in them for a style tag and
    drop it. Styling goes through Text and style= instead."""
    console = Console(stderr=stderr, markup=False)
    if not console.is_terminal and "COLUMNS" not in os.environ:
        console = Console(stderr=stderr, width=140, markup=False)
    return console


def error_text(message: str) -> Text:
    """`error: message`, the prefix in bold red and the message exactly as given."""
    return Text.assemble(("error:", "bold red"), " ", message)
