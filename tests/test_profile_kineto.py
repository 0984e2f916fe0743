"""A CUDA profile parsed by torch's own kineto parser counts each kernel once.

CUPTI emits OVERHEAD records (an activity buffer request, lazy function loading) on the host
with no correlation id of their own; torch gives them the id of the op they ran inside, and its
parser then appends that op's kernels to every such record as well (pytorch/pytorch#193924). In a
one-kernel forward one record read 6 forwards' kernel time for 5: the 118-120 % of single-op
problem files, while a model of hundreds of kernels moved by well under the 1 % check. These
tests feed kineto events through `torch.autograd.profiler.profile._parse_kineto_results`, so the
FunctionEvents are the ones torch itself builds.
"""

from __future__ import annotations

import warnings

import pytest
import torch
from torch import nn
from torch.autograd import DeviceType
from torch.autograd.profiler import profile as autograd_profile
from torch.autograd.profiler_util import EventList

from autokernel.model.profiling.attribution import FORWARD_LABEL, attribute
from autokernel.model.profiling.module_calls import (
    CALL_PREFIX,
    LABEL_PREFIX,
    ModuleCall,
    ModuleRecorder,
)
from autokernel.model.profiling.profiler import _summarize

ITERS = 5
KERNEL_NS = 40_000
GPU = DeviceType.CUDA


class _Kineto:
    """One kineto event as torch's parser reads it: every accessor it calls, defaults for the
    ones a test leaves alone."""

    def __init__(self, name, start, end, corr, linked=0, device=DeviceType.CPU, shapes=(),
                 concrete=(), annotation=False):  # fmt: skip
        self._v = {
            "name": name, "start_ns": start, "end_ns": end, "correlation_id": corr,
            "linked_correlation_id": linked, "device_type": device, "shapes": list(shapes),
            "concrete_inputs": list(concrete), "dtypes": ["float"] * len(shapes),
            "is_user_annotation": annotation,
            "start_thread_id": 7 if device != DeviceType.CPU else 1,
        }  # fmt: skip
        self._v["end_thread_id"] = self._v["start_thread_id"]

    def __getattr__(self, name):
        if name.startswith("_"):
            raise AttributeError(name)
        defaults = {"cuda_elapsed_us": -1, "privateuse1_elapsed_us": -1, "device_index": 0,
                    "fwd_thread_id": 0, "sequence_nr": -1, "flops": 0, "scope": 0}  # fmt: skip
        value = self._v.get(name, defaults.get(name))
        if name in ("stack", "kwinputs", "structured_input_shapes", "structured_input_strides"):
            value = [] if name != "kwinputs" else {}
        if name in ("overload_name", "metadata_json", "activity_type", "extra_meta"):
            value = value if value is not None else ""
        if value is None:
            value = 0
        return lambda: value


class _Result:
    def __init__(self, events):
        self._events = events

    def events(self):
        return self._events

    def trace_start_ns(self):
        return 0


def _events(overhead_records: int) -> list:
    """5 forwards of a parameter-free softmax Model; `overhead_records` of the forwards have a
    CUPTI overhead record inside the op that launched their kernel."""
    out, corr, t = [], 100, 0
    for i in range(ITERS):
        fwd, mod, call, op, inner, launch = (corr + k for k in range(6))
        corr += 10
        shapes, concrete = [[256, 1024], [], []], [None, -1, False]
        out += [
            _Kineto(FORWARD_LABEL, t, t + 900, fwd),
            _Kineto(f"{LABEL_PREFIX}{i}", t + 10, t + 890, mod),
            _Kineto(f"{CALL_PREFIX}{ITERS + i}", t + 15, t + 885, call),
            _Kineto("aten::softmax", t + 20, t + 880, op, shapes=shapes, concrete=concrete),
            _Kineto("aten::_softmax", t + 30, t + 870, inner, shapes=shapes, concrete=concrete),
            _Kineto("cudaLaunchKernel", t + 40, t + 860, launch, linked=inner),
            _Kineto("softmax_warp_forward", t + 1000, t + 1000 + KERNEL_NS, launch, inner, GPU),
            _Kineto(
                f"{LABEL_PREFIX}{i}", t + 1000, t + 1000 + KERNEL_NS, mod, mod, GPU, annotation=True
            ),
        ]
        if i < overhead_records:  # no id of its own: it inherits the enclosing op's
            out.append(_Kineto("Activity Buffer Request", t + 50, t + 60, inner))
        t += 100_000
    return out


def parsed(overhead_records: int) -> EventList:
    with warnings.catch_warnings():  # "CUDA is not available": the parse needs no GPU
        warnings.simplefilter("ignore")
        prof = autograd_profile(use_device="cuda")
    prof.use_device = "cuda"
    events = EventList(
        prof._parse_kineto_results(_Result(_events(overhead_records))), use_device="cuda"
    )
    events._build_tree()
    return events


def test_the_parser_appends_an_ops_kernels_to_its_overhead_record():
    """The mechanism itself, as torch 2.13 builds it: two CPU events hold the one kernel."""
    events = parsed(overhead_records=1)
    holders = [e for e in events if e.device_type == DeviceType.CPU and
               any(k.name == "softmax_warp_forward" for k in e.kernels)]  # fmt: skip
    assert len(holders) == ITERS + 1
    assert {e.name for e in holders} == {"aten::_softmax", "Activity Buffer Request"}


def _recorder() -> ModuleRecorder:
    """The Model's forward of each iteration, then its torch.softmax call (a softmax)."""
    recorder = ModuleRecorder(nn.Module())
    recorder.calls = [ModuleCall("", "Model", None) for _ in range(ITERS)] + [
        ModuleCall(
            "", "torch.softmax", "softmax", {"rows": 256, "cols": 1024}, torch.float32, route="call"
        )
        for _ in range(ITERS)
    ]
    return recorder


@pytest.mark.parametrize("overhead_records", [0, 1, ITERS])
def test_single_op_profile_is_consistent_with_overhead_records(overhead_records):
    result = attribute(list(parsed(overhead_records)), _recorder(), device=True, iterations=ITERS)
    assert result.forward_us == pytest.approx(ITERS * KERNEL_NS / 1e3)
    loaded = type("L", (), {"name": "m", "device": torch.device("cuda"), "dtype": torch.float32})
    prof = _summarize(loaded, result, wall_ms=1.0)
    assert prof.consistent, (prof.attributed_ms, prof.total_ms)
    (target,) = prof.targets
    assert target.kind == "softmax" and target.share == pytest.approx(1.0)
    assert sum(r.share for r in prof.rows) == pytest.approx(1.0)
