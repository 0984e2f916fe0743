"""A stand-in harness and small agents for loop tests.

The loop's own logic (commits, refs, rows, move-on rules, crash recovery) is tested fast
against FakeHarness, whose speed is a pure function of kernel.py's CONFIG; tests/test_run_cli.py
runs the real sandboxed harness end to end.
"""

from __future__ import annotations

import re
import subprocess
from dataclasses import dataclass, field
from pathlib import Path
from types import SimpleNamespace

from autokernel.agents.base import Context, InvalidReply, Proposal
from autokernel.agents.tuner import Tuner, read_config, write_config
from autokernel.harness.verdict import Check, Status, Timing, Verdict
from autokernel.loop import Loop, Settings
from autokernel.orchestrate import Rules
from autokernel.run.results import ResultsLog
from autokernel.run.state import new_state
from autokernel.run.workspace import Workspace
from autokernel.targets import Target, single


class Killed(BaseException):
    """A kill with no cleanup, as SIGKILL would be: no `except Exception` catches it."""


def git(root: Path, *args: str) -> str:
    return subprocess.run(
        ["git", *args], cwd=root, capture_output=True, text=True, check=True
    ).stdout.strip()


def default_speed(config: dict) -> float:
    """µs: the starter's CONFIG is 100; a larger BLOCK_SIZE is faster, other keys cost a bit."""
    us = 100.0 * 4096 / config.get("BLOCK_SIZE", 4096)
    if config.get("VARIANT", "single") != "single":
        us *= 1.3
    if config.get("num_warps", 8) != 8:
        us *= 1.2
    return us


@dataclass
class FakeHarness:
    speed: object = default_speed
    eager_us: float = 60.0  # the starter is 0.6x eager: the 2x rule stays out of the way
    peak_us: float = 10.0  # the latency at 100 % of peak
    spread: float = 0.01  # relative p20-p80
    seconds_per_eval: float = 0.0
    clock: list[float] | None = None  # advanced by seconds_per_eval on each evaluation
    compare_result: tuple = (1.0, 0.01)  # ratio, noise[, per-size entries]
    evaluated: list[str] = field(default_factory=list)
    compared: int = 0
    hook: object = None  # called with the source before the verdict is returned

    def evaluate(self, path: Path, opts=None, on_phase=None) -> Verdict:
        source = Path(path).read_text()
        self.evaluated.append(source)
        if self.clock is not None:
            self.clock[0] += self.seconds_per_eval
        if on_phase:
            on_phase("smoke")
        if self.hook:
            self.hook(source)
        m = re.search(r"# fake-status: (\w+)", source)
        status = Status(m.group(1)) if m else Status.PASS
        if status is not Status.PASS:
            fail = Check("sweep", "64x1024", "float32", False, "planted")
            msg = f"{status.value} in sweep: planted"
            return Verdict(status=status, kernel_type="softmax", message=msg, failure=fail)
        config, _ = read_config(source)
        us = self.speed(config)
        timing = Timing(
            size="64x1024", dtype="float32", us=us, spread_us=us * self.spread,
            eager_us=self.eager_us, compile_us=None, throughput=1000.0 / us, unit="GB/s",
            pct_peak=100.0 * self.peak_us / us, speedup_vs_eager=self.eager_us / us,
            speedup_vs_compile=None,
        )  # fmt: skip
        return Verdict(status=Status.PASS, kernel_type="softmax", message="PASS",
                       timings=[timing], harness_s=0.5)  # fmt: skip

    def compare(self, best: Path, candidate: Path, opts=None):
        self.compared += 1
        ratio, noise = self.compare_result[:2]
        sizes = self.compare_result[2] if len(self.compare_result) > 2 else []
        return SimpleNamespace(ratio=ratio, noise=noise, error=None, sizes=sizes)


class ScriptedAgent:
    """Replies from a list: a source-transform callable, an exception, or None (nothing left)."""

    def __init__(self, script: list, name: str = "scripted") -> None:
        self.script, self.name, self.contexts = list(script), name, []

    def propose(self, ctx: Context) -> Proposal | None:
        self.contexts.append(ctx)
        if not self.script:
            return None
        step = self.script.pop(0)
        if isinstance(step, BaseException):
            raise step
        if step is None:
            return None
        source, hypothesis, tokens = step(ctx.kernel_source)
        return Proposal(source, hypothesis, tokens)


def set_config(**changes):
    def step(source: str):
        config, _ = read_config(source)
        return write_config(source, {**config, **changes}), f"set {changes}", 100

    return step


def planted(status: str):
    def step(source: str):
        return source + f"\n# fake-status: {status}\n", f"planted {status}", 50

    return step


def invalid(tokens: int = 10) -> InvalidReply:
    return InvalidReply("no code block in the reply", tokens)


def make_loop(
    root: Path,
    harness: FakeHarness | None = None,
    agent=None,
    rules: Rules | None = None,
    max_experiments: int | None = None,
    hours: float = 10.0,
    targets: list[Target] | None = None,
    clock: list[float] | None = None,
    max_tokens: int | None = None,
    begin: bool = True,
    revisit: bool = True,
) -> tuple[Loop, FakeHarness]:
    harness = harness or FakeHarness()
    clock = clock if clock is not None else harness.clock or [0.0]
    harness.clock = clock
    ws = Workspace.open(root)
    state = new_state("t1", "x", hours, targets or [single("softmax")], max_tokens)
    loop = Loop(
        ws, state, agent or Tuner(), ResultsLog(root / "results.tsv"),
        # on_gpu: the fake harness's figures stand for GPU figures (the 2x rule applies)
        Settings(on_gpu=True, max_experiments=max_experiments, rules=rules or Rules(),
                 revisit=revisit),
        evaluate=harness.evaluate, compare=harness.compare, clock=lambda: clock[0],
    )  # fmt: skip
    if begin:
        loop.begin()
    return loop, harness


def reopen(
    root: Path, harness: FakeHarness, agent=None, max_experiments=None, rules: Rules | None = None
) -> Loop:
    """A fresh process's view of the run: state from disk, branch checked out again."""
    from autokernel.run.state import load

    state = load(root)
    assert state is not None
    ws = Workspace.open(root)
    if ws.branch != f"autokernel/{state.tag}":
        ws.resume(state.tag)
    clock = harness.clock or [0.0]
    return Loop(
        ws, state, agent or Tuner(), ResultsLog(root / "results.tsv"),
        Settings(on_gpu=True, max_experiments=max_experiments, rules=rules or Rules()),
        evaluate=harness.evaluate, compare=harness.compare, clock=lambda: clock[0],
    )  # fmt: skip
