"""The profile's generic rows made targets: each traced into a region description.

After attribution, the generic rows worth a night (a share of the model's time of at least
GENERIC_MIN_SHARE, the MAX_GENERIC largest) get one more forward in which the recorder keeps a
copy of each one's first call's arguments; each is then traced (autokernel.model.capture) as
the call it was: a torch call with its arguments, a model function, or a module's forward with
its parameters and buffers passed in as inputs (in named_parameters then named_buffers order,
as verify passes them). A row whose trace fails stays 'other', with the reason as a note.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import torch
from torch import nn

from autokernel.model import calls as callnames
from autokernel.model.capture import CaptureError, capture
from autokernel.model.profiling.module_calls import ModuleRecorder

if TYPE_CHECKING:
    from autokernel.model.loading import LoadedModel
    from autokernel.model.profiling.profile import Profile

GENERIC_MIN_SHARE = 0.02  # of the ops' time: below, a night's gain cannot show in the model
MAX_GENERIC = 8  # generic targets per plan: each costs a trace now and a starter in `run`


def region_callable(example: tuple[Callable, tuple, dict]) -> tuple[Callable, list]:
    """(fn over tensors, the tensors) reproducing one recorded call."""
    owner, args, kwargs = example
    values, spec = callnames.leaves(args, kwargs)
    tensors = [v for v in values if isinstance(v, torch.Tensor)]
    n = len(tensors)
    if isinstance(owner, nn.Module):
        # The module's own parameters and buffers, read by its forward as it runs: the trace
        # finds them among the region's inputs by identity (autokernel.model.capture).
        extra = callnames.module_tensors(owner)

        def module_region(*ts: torch.Tensor) -> Any:
            a, k = callnames.rebuild(spec, values, list(ts[:n]))
            return owner(*a, **k)

        return module_region, [*tensors, *extra]

    def call_region(*ts: torch.Tensor) -> Any:
        a, k = callnames.rebuild(spec, values, list(ts))
        return owner(*a, **k)

    return call_region, tensors


def add_regions(prof: Profile, loaded: LoadedModel, recorder: ModuleRecorder) -> None:
    """Trace the generic rows worth a target; the others become 'other' rows."""
    from autokernel.model.generic_starter import NoStarter, starter_for  # imports Inductor

    candidates = [r for r in prof.rows if r.kind == "generic"]
    # The ops' time, not the forward's: on a CPU the Python between ops (overhead) can be most
    # of a small model's forward, and no kernel wins it back.
    ops_ms = max(prof.total_ms - prof.overhead_ms, 1e-9)
    chosen = sorted((r for r in candidates if r.ms / ops_ms >= GENERIC_MIN_SHARE),
                    key=lambda r: r.ms, reverse=True)[:MAX_GENERIC]  # fmt: skip
    if chosen:
        recorder.grab = {r.route for r in chosen}
        with recorder.active():
            loaded.run()
    recorder.remove()
    for row in candidates:
        example = recorder.examples.get(row.route) if row in chosen else None
        if example is not None:
            fn, tensors = region_callable(example)
            try:
                region = capture(fn, tensors, row.name).to_dict()
                starter_for(region, loaded.device)  # a target needs a starter to begin from
                row.region, row.shape = region, dict(region["symbols"])
                continue
            except (CaptureError, NoStarter) as exc:
                prof.notes.append(f"{row.name}: not a generic target: {exc}")
        row.kind, row.name, row.args, row.route = "other", row.op or row.name, {}, ""
