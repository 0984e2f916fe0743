"""No false failures: reference.py itself, wrapped as a kernel, passes all five stages for every
type and dtype. (Guards off: this checks the stages, not the guards.)"""

from __future__ import annotations

import pytest

from autokernel.harness.sandbox import Options, evaluate
from autokernel.harness.verdict import STAGES, Status
from autokernel.specs import SPECS

TEMPLATE = """import reference
KERNEL_TYPE = {name!r}


def kernel_fn(*args):
    return reference.{name}(*args)
"""


@pytest.mark.slow
@pytest.mark.parametrize("name", SPECS)
def test_reference_passes_every_stage(name, tmp_path):
    path = tmp_path / "kernel.py"
    path.write_text(TEMPLATE.format(name=name))
    v = evaluate(path, Options(guards=False, timing=False, seed=1234))
    assert v.status is Status.PASS, v.message
    assert [s.name for s in v.stages] == list(STAGES)
    assert all(s.status == "PASS" and s.checks > 0 for s in v.stages)
    sweep = next(s for s in v.stages if s.name == "sweep")
    assert sweep.checks == 3 * len(SPECS[name].cpu.sweep)  # every size x fp16, bf16, fp32
