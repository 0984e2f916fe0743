"""All nine shipped starters pass the five stages under the Triton interpreter, with guards on,
and get timed (CPU figures)."""

from __future__ import annotations

from pathlib import Path

import pytest

from autokernel.harness.guards import literal_assignment
from autokernel.harness.sandbox import Options, evaluate
from autokernel.harness.verdict import STAGES, Status
from autokernel.specs import SPECS

KERNELS = Path(__file__).parents[1] / "kernels"


@pytest.mark.parametrize("name", SPECS)
def test_starter_declares_the_contract(name):
    source = (KERNELS / f"{name}.py").read_text()
    assert literal_assignment(source, "KERNEL_TYPE") == name
    config = literal_assignment(source, "CONFIG")
    space = literal_assignment(source, "SEARCH_SPACE")
    assert isinstance(config, dict) and isinstance(space, dict) and space
    for key, values in space.items():
        assert key in config, f"SEARCH_SPACE key {key} missing from CONFIG"
        assert config[key] in values, f"CONFIG[{key!r}] is not one of its SEARCH_SPACE values"


@pytest.mark.slow
@pytest.mark.parametrize("name", SPECS)
def test_starter_passes_all_stages(name):
    v = evaluate(KERNELS / f"{name}.py", Options(compile_baseline=False, seed=7))
    assert v.status is Status.PASS, f"{v.message}\n{v.failure}\n{v.stderr_tail}"
    assert [s.status for s in v.stages] == ["PASS"] * len(STAGES)
    assert v.interpreter and v.timings and v.timings[0].us > 0
    assert "CPU" in v.clock
