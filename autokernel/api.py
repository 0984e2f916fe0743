"""Load a run's optimized kernels into your own model, in one call.

    from autokernel.api import use_kernels, patch_model

    with use_kernels(model, "runs/llama") as patch:   # modules patched, functions swapped
        logits = model(tokens)                        # or: torch.compile(model)(tokens)
    print(patch.counts())                             # kernel vs fallback calls per type
    patch = patch_model(model, "runs/llama")          # for good; patch.remove() undoes it

Kernels are the workspace's optimized/<target>.py, else each target's best kept kernel.py (see
autokernel.verify.collect_kernels). Calls a kernel was not built for run PyTorch (see
autokernel.kernel_ops for the routing policy). Inference only: the ops have no backward.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from pathlib import Path

import torch
from torch import nn

from autokernel.kernel_ops import Policy
from autokernel.patching import Patch


def load_kernels(
    workspace: str | Path, policy: Policy = "dtype", keep_slower: bool = False
) -> Patch:
    """The workspace's kernels as a Patch (apply with `patch.applied(model)` or `install`). On a
    GPU a kernel whose best measured slower than eager is left out unless keep_slower."""
    from autokernel.verify import collect_kernels

    skip = torch.cuda.is_available() and not keep_slower
    kernels, _, _ = collect_kernels(Path(workspace), skip_slower=skip)
    return Patch(kernels, policy)


@contextlib.contextmanager
def use_kernels(
    model: nn.Module, workspace: str | Path | Patch, policy: Policy = "dtype"
) -> Iterator[Patch]:
    """The model runs the kernels inside the block; everything is restored after it."""
    patch = workspace if isinstance(workspace, Patch) else load_kernels(workspace, policy)
    with patch.applied(model):
        yield patch


def patch_model(model: nn.Module, workspace: str | Path | Patch, policy: Policy = "dtype") -> Patch:
    """Patch the model for good (functions swapped only while its forward runs); the returned
    Patch has the counters, and `remove()` undoes it."""
    patch = workspace if isinstance(workspace, Patch) else load_kernels(workspace, policy)
    patch.install(model)
    return patch
