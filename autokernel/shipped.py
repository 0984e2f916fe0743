"""Where the files the package ships are found: the starter kernels and the LLM's playbook.

A checkout keeps them at the top of the repository (kernels/, program.md), where their editors
look, and autokernel/ links to them; a built wheel has them inside the package. Either way they
are found beside this module, never through the current directory or sys.path, so a user's own
`kernels` package or a folder of the same name cannot stand in for them.
"""

from __future__ import annotations

from pathlib import Path

PACKAGE = Path(__file__).resolve().parent
STARTERS = (PACKAGE / "kernels").resolve()  # one <kernel_type>.py per type
PROGRAM = (PACKAGE / "program.md").resolve()  # the LLM agents' system prompt


def starter_path(kernel_type: str) -> Path:
    """The shipped starter of `kernel_type` (the caller checks the type against the specs)."""
    return STARTERS / f"{kernel_type}.py"
