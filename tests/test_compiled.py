"""Spilled registers reach the verdict and the tuner (autokernel.harness.spills, loop.py).

The H200 sweeps showed spilling configs 7-35x slower than their neighbours. Without a GPU no
kernel compiles, so Triton's per-device cache is stood in for by objects of the same shape.
"""

from __future__ import annotations

from pathlib import Path
from types import ModuleType, SimpleNamespace

import pytest
from loop_helpers import FakeHarness, ScriptedAgent, make_loop, set_config

from autokernel.agents.tuner import read_config
from autokernel.harness.compiled import spilled_registers
from autokernel.run.results import ResultsLog
from autokernel.run.state import load


def rows(root: Path) -> list[dict[str, str]]:
    return ResultsLog(root / "results.tsv").read()


class FakeJit:
    """What spills.py reads of a triton JITFunction: fn, and device_caches whose entries start
    with the dict of compiled kernels."""

    def __init__(self, *spills: int | None) -> None:
        self.fn = lambda: None
        kernels = {i: SimpleNamespace(n_spills=n) for i, n in enumerate(spills) if n is not None}
        self.device_caches = {0: (kernels, {}, "target", "backend", "binder")}


def module(**globals_: object) -> ModuleType:
    m = ModuleType("candidate")
    vars(m).update(globals_)
    return m


def test_the_worst_compiled_kernel_counts():
    m = module(_a=FakeJit(0, 12), _b=FakeJit(40), kernel_fn=lambda: None, CONFIG={})
    assert spilled_registers(m) == 40


def test_no_spills_is_zero_and_unknown_is_none():
    assert spilled_registers(module(_a=FakeJit(0, 0))) == 0
    assert spilled_registers(module(kernel_fn=lambda: None)) is None  # nothing compiled
    assert spilled_registers(module(_a=FakeJit())) is None  # compiled nothing yet
    broken = FakeJit(8)
    broken.device_caches = "not the layout we know"
    assert spilled_registers(module(_a=broken)) is None


class SpillingGPU(FakeHarness):
    """BLOCK_SIZE >= 8192 spills and is slower; the verdict says how much it spilled."""

    def evaluate(self, path, opts=None, on_phase=None):
        verdict = super().evaluate(path, opts, on_phase)
        config, _ = read_config(Path(path).read_text())
        if config.get("BLOCK_SIZE", 0) >= 8192:
            verdict.spilled_registers = 96
            for t in verdict.timings:
                t.us *= 3
        else:
            verdict.spilled_registers = 0
        return verdict


@pytest.mark.slow
def test_a_spilling_config_that_lost_prunes_larger_ones(tmp_path):
    harness = SpillingGPU(speed=lambda c: 100.0)
    agent = ScriptedAgent([set_config(BLOCK_SIZE=8192), set_config(num_warps=4)])
    loop, _ = make_loop(tmp_path, harness, agent=agent, max_experiments=3)
    loop.run()
    assert [r["status"] for r in rows(tmp_path)][:2] == ["keep", "revert"]
    oversized = load(tmp_path).targets[0].oversized_configs
    assert [c["BLOCK_SIZE"] for c in oversized] == [8192]
    assert agent.contexts[1].oversized_configs == oversized  # the next proposal knows


def test_a_config_that_did_not_spill_is_not_pruned(tmp_path):
    harness = FakeHarness(speed=lambda c: 100.0 if c.get("num_warps", 8) == 8 else 130.0)
    agent = ScriptedAgent([set_config(num_warps=4)])
    loop, _ = make_loop(tmp_path, harness, agent=agent, max_experiments=2)
    loop.run()
    assert [r["status"] for r in rows(tmp_path)] == ["keep", "revert"]
    assert load(tmp_path).targets[0].oversized_configs == []


def test_resident_warps_follow_the_occupancy_arithmetic():
    from autokernel.harness.compiled import resident_warps

    assert resident_warps(regs=32, shared=0, num_warps=8) == 64  # every warp slot
    assert resident_warps(regs=128, shared=0, num_warps=8) == 16  # registers bind: 2 blocks
    assert resident_warps(regs=255, shared=0, num_warps=4) == 8  # 256 regs/thread: 8 warps
    assert resident_warps(regs=32, shared=100 * 1024, num_warps=4) == 8  # shared: 2 blocks
    assert resident_warps(regs=16, shared=0, num_warps=1) == 32  # the 32-block limit


PTX = """
    ld.global.v4.b32 { %r1, %r2, %r3, %r4 }, [ %rd1 + 0 ];
    @%p1 ld.global.b16 { %rs1 }, [ %rd2 + 0 ];
    ld.global.b16 { %rs2 }, [ %rd3 + 0 ];
    ld.global.v2.b32 { %r5, %r6 }, [ %rd4 + 0 ];
    st.global.v4.b32 [ %rd5 + 0 ], { %r1, %r2, %r3, %r4 };
"""


def test_kernel_facts_read_registers_spills_occupancy_and_load_widths():
    from autokernel.harness.compiled import kernel_facts

    kernel = SimpleNamespace(
        n_regs=40,
        n_spills=3,
        metadata=SimpleNamespace(num_warps=8, shared=2048, name="_softmax_kernel"),
        asm={"ptx": PTX},
    )
    jit = FakeJit()
    jit.device_caches = {0: ({"k": kernel}, {}, "t", "b", "binder")}
    (facts,) = kernel_facts(module(_k=jit))
    assert (facts.name, facts.regs, facts.spills, facts.shared) == ("_softmax_kernel", 40, 3, 2048)
    assert (facts.vector_loads, facts.loads) == (1, 4)  # the v2.b32 load is 8 bytes, not 16
    assert facts.resident_warps == 48  # 40 regs -> 1280 per warp -> 51 warps -> 6 blocks of 8
    text = facts.describe()
    assert "3 spilled" in text and "1 of 4 global load sites 16-byte" in text
    assert kernel_facts(module(_k=FakeJit())) is None  # nothing compiled: unknown


def test_forget_drops_what_earlier_calls_compiled():
    from autokernel.harness.compiled import forget

    jit = FakeJit(4)
    forget(module(_k=jit))
    assert spilled_registers(module(_k=jit)) is None
