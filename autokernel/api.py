"""Load a run's optimized kernels into your own model, in one call.

    from autokernel.api import use_kernels, patch_model

    with use_kernels(model, "runs/llama") as patch:   # modules patched, functions swapped
        logits = model(tokens)                        # or: torch.compile(model)(tokens)
    print(patch.counts())                             # kernel vs fallback calls per type
    patch = patch_model(model, "runs/llama")          # for good; patch.remove() undoes it
    with use_kernels(model, "runs/llama", cuda_graphs=True):  # forward replayed as a CUDA graph
        logits = model(tokens).clone()                # the graph's output is reused: clone it

Kernels are the workspace's optimized/<target>.py, else each target's best kept kernel.py (see
autokernel.model.verify.verifier.collect_kernels). Where verify decided which kernels make the
whole model faster in a mode (optimized/modes.json), only those are plugged in for that mode
(`mode`, default: compile on a GPU, eager on the CPU); `mode="all"` plugs in every kernel. Calls
a kernel was not built for run PyTorch (see autokernel.model.kernel_ops for the routing policy).
Inference only: the ops have no backward.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from pathlib import Path

import torch
from torch import nn

from autokernel.mode import parse_mode
from autokernel.model.kernel_ops import Policy
from autokernel.model.patching import Patch
from autokernel.model.verify import mode_record
from autokernel.model.verify.cuda_graphs import CudaGraphError, GraphedForward

__all__ = ["CudaGraphError", "load_kernels", "patch_model", "use_kernels"]


def load_kernels(
    workspace: str | Path,
    policy: Policy = "dtype",
    keep_slower: bool = False,
    mode: str | None = None,
) -> Patch:
    """The workspace's kernels as a Patch (apply with `patch.applied(model)` or `install`). On a
    GPU a kernel whose best measured slower than eager is left out unless keep_slower; where
    optimized/modes.json says which kernels helped the whole model in `mode`, only those."""
    from autokernel.model.verify.verifier import collect_kernels

    skip = torch.cuda.is_available() and not keep_slower
    kernels, _, _ = collect_kernels(Path(workspace), skip_slower=skip)
    if mode != "all":
        helped = mode_record.kept(Path(workspace), parse_mode(mode))
        if helped is not None:
            kernels = [k for k in kernels if k.name in helped]
    return Patch(kernels, policy)


@contextlib.contextmanager
def use_kernels(
    model: nn.Module,
    workspace: str | Path | Patch,
    policy: Policy = "dtype",
    mode: str | None = None,
    cuda_graphs: bool = False,
) -> Iterator[Patch]:
    """The model runs the kernels inside the block; everything is restored after it. With
    cuda_graphs the forward is captured in a CUDA graph on its first call per input signature
    and replayed after (CudaGraphError, one line, where the model cannot be captured); the
    output tensors are the graph's and are overwritten by the next call."""
    patch = (
        workspace if isinstance(workspace, Patch) else load_kernels(workspace, policy, mode=mode)
    )
    with patch.installed(model):
        if not cuda_graphs:
            yield patch
            return
        params = list(model.parameters())
        if params and params[0].device.type != "cuda":
            raise CudaGraphError(
                "cuda_graphs=True needs the model on a CUDA device (it is on "
                f"{params[0].device.type}): move it with model.cuda(), or leave cuda_graphs off"
            )
        before = model.__dict__.get("forward")  # an installed patch's forward, if any
        model.forward = GraphedForward(model.forward)
        try:
            yield patch
        finally:
            if before is None:
                model.__dict__.pop("forward", None)
            else:
                model.forward = before


def patch_model(
    model: nn.Module,
    workspace: str | Path | Patch,
    policy: Policy = "dtype",
    mode: str | None = None,
) -> Patch:
    """Patch the model for good (functions swapped only while its forward runs); the returned
    Patch has the counters, and `remove()` undoes it. `mode` as in load_kernels."""
    patch = (
        workspace if isinstance(workspace, Patch) else load_kernels(workspace, policy, mode=mode)
    )
    patch.install(model)
    return patch
