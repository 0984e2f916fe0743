"""The user's baseline mode: what a patched model is measured against.

A user who already runs `torch.compile` judges a kernel by whether the compiled model gets faster,
not by whether eager PyTorch does; so run, verify and report take `--mode eager|compile`, and the
default follows the device: compile on a GPU (where Inductor is what a user would ship), eager on
the CPU (where the interpreter-run kernels are for correctness only and compile adds minutes).
"""

from __future__ import annotations

from typing import Literal

import torch

Mode = Literal["eager", "compile"]
MODES: tuple[Mode, ...] = ("eager", "compile")


class ModeError(ValueError):
    """A mode name that is not one of MODES."""


def parse_mode(value: str | None, device: torch.device | str | None = None) -> Mode:
    """`value` checked against MODES, or the default for `device` when it is None or "auto"."""
    if value is None or value == "auto":
        return default_mode(device)
    if value not in MODES:
        raise ModeError(f"--mode {value!r}: use one of {', '.join(MODES)} (or auto)")
    return value  # type: ignore[return-value]


def default_mode(device: torch.device | str | None = None) -> Mode:
    """compile where the model runs on CUDA, else eager."""
    if device is None:
        on_gpu = torch.cuda.is_available()
    else:
        on_gpu = torch.device(device).type == "cuda"
    return "compile" if on_gpu else "eager"
