"""What an LLM agent is told about a generic target: its region's aten ops as the reference,
the spec with the region's sizes, and torch.compile's own Triton as the kernel to improve."""

from __future__ import annotations

import pytest
import torch

from autokernel.agents.prompt import build_request
from autokernel.run import briefing
from autokernel.run import state as run_state
from autokernel.specs import GENERIC
from autokernel.targets import Target
from tests.test_region import region


@pytest.mark.slow
def test_the_prompt_holds_the_region_and_inductors_starter():
    r = region("log_softmax")
    target = Target("log_softmax", GENERIC, shapes=(dict(r.symbols),), dtype="float32",
                    region=r.to_dict(), route="call:torch.log_softmax|x|[]")  # fmt: skip
    state = run_state.new_state("t", "openai", 1.0, [target])
    ts = state.targets[0]
    source, what = briefing.target_starter(target)
    assert what == "baseline: torch.compile's own Triton" and 'KERNEL_TYPE = "generic"' in source
    ctx = briefing.context(state, ts, source, [], on_gpu=torch.cuda.is_available())
    assert "aten._log_softmax.default" in ctx.reference_source
    assert "kernel_fn(x0)" in ctx.spec_text and "6x40" in ctx.spec_text
    request = build_request(ctx)
    assert "aten._log_softmax.default" in request and "triton_" in request
