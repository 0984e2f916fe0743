"""Which kernel backend a run works in: Triton, CUDA C++, or either, the agent's choice.

`autokernel run --backend triton|cuda|any` (default triton). A target starts from the shipped
starter of its backend (kernels/<type>.py, kernels/cuda/<type>.py; "any" starts from Triton's),
and a proposal whose BACKEND the run does not allow is an invalid reply. CUDA needs a GPU: on a
machine without one, "any" means Triton only, and "cuda" is refused before the run starts.
"""

from __future__ import annotations

from pathlib import Path

from autokernel.harness.guards import literal_assignment
from autokernel.harness.sandbox import BACKENDS, NO_GPU
from autokernel.shipped import STARTERS

CHOICES = (*BACKENDS, "any")
DEFAULT = "triton"


class BackendError(ValueError):
    """A --backend the run cannot work in; the message says what to do."""


def parse(choice: str | None) -> str:
    choice = (choice or DEFAULT).lower()
    if choice not in CHOICES:
        raise BackendError(f"--backend {choice!r}: choose one of {', '.join(CHOICES)}")
    return choice


def allowed(choice: str, on_gpu: bool) -> tuple[str, ...]:
    """The BACKEND values a kernel.py may have in a run of this choice on this machine."""
    if choice == "any":
        return BACKENDS if on_gpu else ("triton",)
    return (choice,)


def of_source(source: str) -> str:
    """The BACKEND a kernel file declares ("triton" when it names none)."""
    value = literal_assignment(source, "BACKEND")
    return value if isinstance(value, str) else "triton"


def starter_path(kernel_type: str, backend: str) -> Path:
    """The shipped starter of a kernel type in a backend (it may not exist)."""
    if backend == "cuda":
        return STARTERS / "cuda" / f"{kernel_type}.py"
    return STARTERS / f"{kernel_type}.py"


def check(choice: str, kernel_types: list[str], on_gpu: bool) -> None:
    """BackendError when a run of this choice cannot start: CUDA without a GPU, or a target
    whose kernel type has no CUDA starter."""
    if choice != "cuda":
        return
    if not on_gpu:
        raise BackendError(f"--backend cuda: {NO_GPU}")
    missing = sorted({k for k in kernel_types if not starter_path(k, "cuda").exists()})
    if missing:
        raise BackendError(f"--backend cuda: no CUDA starter for {', '.join(missing)} "
                           "(kernels/cuda/ has none); use --backend any or triton")  # fmt: skip


def start_backend(choice: str) -> str:
    """The backend a target's first experiment (the shipped starter) is in."""
    return "cuda" if choice == "cuda" else "triton"


def briefing(choice: str, kernel_type: str, on_gpu: bool) -> str:
    """What the agent is told about backends, one line."""
    options = allowed(choice, on_gpu)
    if options == ("cuda",):
        return ('backend: CUDA C++; keep BACKEND = "cuda" (CUDA_SOURCE built by '
                "autokernel.cuda_build.load; program.md, section CUDA)")  # fmt: skip
    if len(options) == 1:
        why = "" if choice == "triton" else f" (CUDA is not available: {NO_GPU})"
        return f'backend: Triton; keep BACKEND = "triton"{why}'
    cuda = starter_path(kernel_type, "cuda").exists()
    shown = "; the shipped CUDA starter of this type is shown below" if cuda else ""
    return ('backend: your choice: BACKEND = "triton" or "cuda" (CUDA C++: program.md, section '
            f"CUDA); switching is one experiment like any other{shown}")  # fmt: skip


def other_starter(choice: str, kernel_type: str, current: str, on_gpu: bool) -> str:
    """The starter of the backend the agent is not in, when it may switch to it: what a switch
    would start from. "" when there is none."""
    options = allowed(choice, on_gpu)
    others = [b for b in options if b != current]
    if not others:
        return ""
    path = starter_path(kernel_type, others[0])
    try:
        return path.read_text()
    except OSError:
        return ""
