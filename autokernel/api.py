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

from torch import nn

from autokernel.kernel_ops import Policy
from autokernel.patching import Patch


def load_kernels(workspace: str | Path, policy: Policy = "dtype") -> Patch:
    """The workspace's kernels as a Patch (apply with `patch.applied(model)` or `install`)."""
    from autokernel.verify import collect_kernels

    kernels, _, _ = collect_kernels(Path(workspace))
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
