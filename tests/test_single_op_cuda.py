"""A single-op model's CUDA profile, built from torch's own FunctionEvent objects, is counted once.

torch appends a record_function range's device-side span (gpu_user_annotation) to the range's CPU
event as if it were a kernel wherever kineto links the two. In a one-kernel forward that span is
a whole forward's kernel time, so one such link read 6 forwards' time for 5 (shares of 120 %).
"""

from __future__ import annotations

import pytest
import torch
from torch import nn
from torch.autograd import DeviceType
from torch.autograd.profiler_util import FunctionEvent

from autokernel.model.profiling.attribution import FORWARD_LABEL, attribute
from autokernel.model.profiling.module_calls import (
    CALL_PREFIX,
    LABEL_PREFIX,
    ModuleCall,
    ModuleRecorder,
)
from autokernel.model.profiling.profiler import _summarize

ITERS = 5
KERNEL_US = 40.0


class _Events:
    """Builds a profile the way torch's parser does: CPU events nested by parent, device events
    appended to the CPU event whose correlation id they carry."""

    def __init__(self) -> None:
        self.events: list[FunctionEvent] = []
        self._id = 0
        self._clock = 0.0

    def cpu(self, name: str, parent: FunctionEvent | None, shapes: list | None = None):
        self._id += 1
        self._clock += 1.0
        ev = FunctionEvent(
            id=self._id, name=name, thread=1, start_us=self._clock, end_us=self._clock + 0.5,
            input_shapes=shapes or [], concrete_inputs=[None, -1, False][: len(shapes or [])] or
            None, stack=[], use_device="cuda", device_type=DeviceType.CPU,
        )  # fmt: skip
        ev.input_dtypes = ["c10::BFloat16"] * len(shapes or [])
        if parent is not None:
            ev.set_cpu_parent(parent)
            parent.append_cpu_child(ev)
        self.events.append(ev)
        return ev

    def device(self, name: str, launcher: FunctionEvent, us: float, annotation: bool = False):
        self._id += 1
        ev = FunctionEvent(
            id=self._id, name=name, thread=7, start_us=self._clock, end_us=self._clock + us,
            input_shapes=[], stack=[], use_device="cuda", device_type=DeviceType.CUDA,
            is_user_annotation=annotation,
        )  # fmt: skip
        launcher.append_kernel(name, 0, us)  # what torch's parser does for a linked event
        self.events.append(ev)
        return ev


def _single_op_profile(linked_spans: int) -> list[FunctionEvent]:
    """5 forwards of `softmax(x)` in a parameter-free Model; `linked_spans` of the Model range's
    device spans come linked to its CPU event."""
    b = _Events()
    for i in range(ITERS):
        fwd = b.cpu(FORWARD_LABEL, None)
        model = b.cpu(f"{LABEL_PREFIX}{i}", fwd)
        call = b.cpu(f"{CALL_PREFIX}{ITERS + i}", model)
        softmax = b.cpu("aten::softmax", call, shapes=[[256, 1024], [], []])
        inner = b.cpu("aten::_softmax", softmax, shapes=[[256, 1024], [], []])
        b.cpu("cudaLaunchKernel", inner)
        b.device("softmax_warp_forward", inner, KERNEL_US)
        b.device(f"{LABEL_PREFIX}{i}", model, KERNEL_US, annotation=True)
        if i >= linked_spans:  # not linked: torch keeps the span apart from the range
            model.kernels.pop()
    return b.events


def _recorder() -> ModuleRecorder:
    """The parameter-free Model's range of each forward (a module of no kernel type), then
    its torch.softmax call's (a softmax)."""
    recorder = ModuleRecorder(nn.Module())
    recorder.calls = [ModuleCall("", "Model", None) for _ in range(ITERS)] + [
        ModuleCall(
            "",
            "torch.softmax",
            "softmax",
            {"rows": 256, "cols": 1024},
            torch.bfloat16,
            route="call",
        )
        for _ in range(ITERS)
    ]
    return recorder


@pytest.mark.parametrize("linked_spans", [0, 1, ITERS])
def test_single_op_cuda_profile_is_consistent(linked_spans):
    events = _single_op_profile(linked_spans)
    result = attribute(events, _recorder(), device=True, iterations=ITERS)
    assert result.forward_us == pytest.approx(ITERS * KERNEL_US)
    loaded = type("L", (), {"name": "m", "device": torch.device("cuda"), "dtype": torch.bfloat16})
    prof = _summarize(loaded, result, wall_ms=1.0)
    assert prof.consistent, (prof.attributed_ms, prof.total_ms)
    (target,) = prof.targets
    assert target.kind == "softmax" and target.share == pytest.approx(1.0)
    assert sum(r.share for r in prof.rows) == pytest.approx(1.0)
