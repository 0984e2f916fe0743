"""The verdict of one evaluation: what the loop keeps or reverts on, and what an agent reads.

Plain dataclasses that round-trip through JSON, so the worker process can hand them to the
parent without the parent ever importing candidate code.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from enum import Enum
from pathlib import Path
from typing import Any

from autokernel.atomic import write_atomic
from autokernel.secrets import redact


class Status(str, Enum):
    PASS = "PASS"
    FAIL = "FAIL"  # ran, but wrong
    CRASH = "CRASH"  # exception, signal, import/syntax error, illegal memory access
    TIMEOUT = "TIMEOUT"  # the wall-clock limit expired; the process group was killed
    REJECTED = "REJECTED"  # a guard caught a forbidden construct or an implausible result


STAGES: tuple[str, ...] = ("smoke", "sweep", "adversarial", "determinism", "odd_sizes")


@dataclass
class Mismatch:
    """The worst disagreement found in one check, located precisely enough to act on."""

    max_abs_err: float
    max_rel_err: float
    index: list[int]
    got: float
    expected: float
    n_bad: int
    n_total: int


@dataclass
class Check:
    """One call of kernel_fn on one size and dtype, compared with the float64 reference."""

    stage: str
    size: str
    dtype: str
    ok: bool
    message: str = ""
    max_abs_err: float = 0.0
    max_rel_err: float = 0.0
    seconds: float = 0.0


@dataclass
class StageResult:
    name: str
    status: str  # "PASS", "FAIL" or "SKIPPED"
    checks: int = 0
    worst: Check | None = None  # the check with the largest error relative to its tolerance
    seconds: float = 0.0


@dataclass
class Timing:
    """Speed at one benchmark size; throughput in GB/s (memory-bound) or TFLOPS (compute)."""

    size: str
    dtype: str
    us: float
    spread_us: float  # p80 - p20
    eager_us: float | None
    compile_us: float | None
    throughput: float
    unit: str
    pct_peak: float | None
    speedup_vs_eager: float | None
    speedup_vs_compile: float | None
    # the judge's own wall time per call over a batch of back-to-back calls (benchmark.py's
    # cross-check of `us`, which the candidate's process measured)
    judge_wall_us: float | None = None


@dataclass
class Verdict:
    status: Status
    kernel_type: str = ""
    file: str = ""
    sha256: str = ""  # of the kernel file's bytes as judged: verify loads only PASSed hashes
    message: str = ""  # one line an agent can act on
    failure: Check | None = None
    stages: list[StageResult] = field(default_factory=list)
    guards: list[str] = field(default_factory=list)  # guard findings, empty when clean
    timings: list[Timing] = field(default_factory=list)
    clock: str = ""  # "cuda do_bench median (L2 flushed)" or "CPU perf_counter median"
    device: str = ""
    interpreter: bool = False
    seed: int = 0
    harness_s: float = 0.0
    phase_s: dict[str, float] = field(default_factory=dict)  # where the harness time went
    peak_mem_bytes: int = 0
    speedup_vs_eager: float | None = None  # geometric mean over the benchmark sizes
    speedup_vs_compile: float | None = None
    spilled_registers: int | None = None  # per thread, worst compiled kernel; None: unknown
    stderr_tail: str = ""
    sandbox: str = ""  # how the worker was contained: "bwrap", or "none"; "" if none ran
    backend: str = ""  # the kernel's BACKEND as the parent read it: "triton" or "cuda"
    # BACKEND = "cuda": each module the kernel built, {"cached", "compile_s", "seconds"}
    # (compile_s None when the cubin came from the cache; seconds include loading it)
    builds: list[dict[str, Any]] = field(default_factory=list)

    @property
    def build_s(self) -> float | None:
        """Seconds the kernel's CUDA builds took in all (None for a Triton kernel)."""
        return round(sum(b["seconds"] for b in self.builds), 3) if self.builds else None

    def to_json(self) -> dict[str, Any]:
        d = asdict(self)
        d["status"] = self.status.value
        return d

    def write(self, path: Path) -> None:
        """Atomic write: a reader never sees half a verdict, even if we are killed mid-write."""
        write_atomic(path, redact(json.dumps(self.to_json(), indent=2, allow_nan=True)))

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> Verdict:
        d = dict(d)
        d["status"] = Status(d["status"])
        d["failure"] = Check(**d["failure"]) if d.get("failure") else None
        d["stages"] = [
            StageResult(**{**s, "worst": Check(**s["worst"]) if s.get("worst") else None})
            for s in d.get("stages", [])
        ]
        d["timings"] = [Timing(**t) for t in d.get("timings", [])]
        return cls(**d)

    @classmethod
    def read(cls, path: Path) -> Verdict:
        return cls.from_json(json.loads(path.read_text()))
