"""The planted-fault corpus: every file in tests/faults/ is a kernel.py that is wrong or cheats
in one planted way, and the harness must report it with the right status at the right stage.

Each fault file carries one header line:

    # expect: STATUS STAGE [guards-off] [timeout=S] [dtype=D] [gpu=STATUS] [xfail]

STATUS is a verdict status (PASS is never a fault), STAGE the stage the failure must be reported
in (import, static, smoke, sweep, adversarial, determinism, odd_sizes, benchmark, guards).
guards-off evaluates with Options(guards=False) (faults whose point is the sandbox, not the
guards); timeout=S sets the candidate's time limit (default 120 s); dtype=D also pins the
failing check's dtype; gpu=STATUS is the status on a GPU where it differs from the interpreter's
(an access outside the kernel's arguments is a CRASH under the interpreter, which checks every
address, while a GPU may read whatever lies there and FAIL); xfail marks a fault the harness is
known to miss or misclassify (strict: it turns into an error once the harness catches it, so the
token can be dropped). Timing runs
only for faults expected in the benchmark stage. The seed is fixed: which random input first
shows a data-dependent fault (e.g. an ignored cross-entropy row) depends on it.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, replace
from pathlib import Path

import pytest

from autokernel.harness import containment, task_cap
from autokernel.harness.sandbox import Options, evaluate
from autokernel.harness.untrusted_text import printable
from autokernel.harness.verdict import STAGES, Status

FAULTS_DIR = Path(__file__).parent / "faults"
FAULT_FILES = sorted(FAULTS_DIR.glob("*.py"))
MIN_FAULTS = 90  # issue 14: the corpus grew from 51 to at least 90 cases
SEED = 1234
DEFAULT_TIMEOUT_S = 120.0
TIMEOUT_SLACK_S = 30.0  # a TIMEOUT verdict must come back within the limit plus this
KNOWN_STAGES = frozenset({"import", "static", *STAGES, "benchmark", "guards"})


@dataclass(frozen=True)
class Expectation:
    status: Status
    stage: str
    guards: bool = True
    timeout_s: float = DEFAULT_TIMEOUT_S
    dtype: str | None = None
    gpu_status: Status | None = None
    xfail: bool = False


def parse_expectation(path: Path) -> Expectation:
    for line in path.read_text().splitlines():
        if not line.startswith("# expect:"):
            continue
        tokens = line.removeprefix("# expect:").split()
        if len(tokens) < 2:
            raise ValueError(f"{path.name}: '# expect:' needs STATUS and STAGE: {line!r}")
        status, stage, *extra = tokens
        fields: dict = {"status": Status(status), "stage": stage}
        for token in extra:
            if token == "guards-off":
                fields["guards"] = False
            elif token == "xfail":
                fields["xfail"] = True
            elif token.startswith("timeout="):
                fields["timeout_s"] = float(token.removeprefix("timeout="))
            elif token.startswith("dtype="):
                fields["dtype"] = token.removeprefix("dtype=")
            elif token.startswith("gpu="):
                fields["gpu_status"] = Status(token.removeprefix("gpu="))
            else:
                raise ValueError(f"{path.name}: unknown token {token!r} in {line!r}")
        return Expectation(**fields)
    raise ValueError(f"{path.name}: no '# expect: STATUS STAGE' header line")


def _param(path: Path):
    marks = []
    try:
        if parse_expectation(path).xfail:
            marks.append(
                pytest.mark.xfail(
                    strict=True, reason="known harness miss: see the file's docstring"
                )
            )
    except ValueError:
        pass  # test_headers_are_well_formed reports it
    if path.stem.startswith("escape_") and containment.kind() == containment.NONE:
        # An escape attack is caught by the OS sandbox, not by the harness's checks.
        reason = f"no containment here: {containment.probe().reason}"
        marks.append(pytest.mark.skip(reason=reason))
    if path.stem.endswith("_bomb_guards_off"):
        # Stopped by the task cap alone: where none applies, the payload stops itself (FAIL).
        plan = task_cap.plan(containment.kind())
        if plan.kind == task_cap.NONE:
            marks.append(pytest.mark.skip(reason=plan.reason))
    return pytest.param(path, id=path.stem, marks=marks)


def test_corpus_is_large_enough():
    assert len(FAULT_FILES) >= MIN_FAULTS, f"only {len(FAULT_FILES)} fault files in {FAULTS_DIR}"


@pytest.mark.parametrize("path", [pytest.param(p, id=p.stem) for p in FAULT_FILES])
def test_headers_are_well_formed(path):
    exp = parse_expectation(path)
    assert exp.status is not Status.PASS, "a fault must not be expected to pass"
    assert exp.gpu_status is not Status.PASS, "a fault must not be expected to pass on a GPU"
    assert exp.stage in KNOWN_STAGES, f"unknown stage {exp.stage!r}"


@pytest.mark.slow
@pytest.mark.parametrize("path", [_param(p) for p in FAULT_FILES])
def test_fault_is_caught_where_it_first_shows(path):
    exp = parse_expectation(path)
    opts = Options(
        timing=exp.stage == "benchmark",
        compile_baseline=False,
        timeout_s=exp.timeout_s,
        guards=exp.guards,
        seed=SEED,
    )
    phases: list[str] = []
    t0 = time.monotonic()
    verdict = evaluate(path, opts, on_phase=phases.append)
    elapsed = time.monotonic() - t0
    # A phase reaches the user's terminal as it is: none may carry a control character.
    assert all(printable(p) == p for p in phases), f"unprintable phase: {phases!r}"
    if not verdict.interpreter and exp.gpu_status is not None:
        exp = replace(exp, status=exp.gpu_status)
    got = f"{verdict.status.value} in {verdict.failure.stage if verdict.failure else '-'}"
    assert verdict.status is exp.status, (
        f"expected {exp.status.value}, got {got}: {verdict.message}"
    )
    assert verdict.failure is not None, f"no failure recorded: {verdict.message}"
    assert verdict.failure.stage == exp.stage, (
        f"expected {exp.status.value} in {exp.stage}, got {got}: {verdict.message}"
    )
    assert verdict.failure.message.strip(), "the failure carries no message"
    assert verdict.message.strip()
    if exp.dtype is not None:
        assert verdict.failure.dtype == exp.dtype, verdict.message
    if exp.status is Status.TIMEOUT:
        assert elapsed < exp.timeout_s + TIMEOUT_SLACK_S, f"TIMEOUT took {elapsed:.1f} s"
