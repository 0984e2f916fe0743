"""A Profile: the ranked rows of where a model's time went, per forward, and the totals that
check nothing was counted twice. Plain records, written by profiler.py and regions.py, read by
the plan writer and the view."""

from __future__ import annotations

from dataclasses import dataclass, field

from autokernel.model.profiling.attribution import KERNEL_TYPES
from autokernel.model.profiling.compiled import CompiledFigures
from autokernel.specs import GENERIC
from autokernel.stats import amdahl

CHECK_TOLERANCE = 0.01  # attributed time must match the profiler's total within 1 %


@dataclass
class Row:
    """One line of the profile: a kernel target, or an op listed as 'other'."""

    kind: str  # kernel type or "other"
    name: str  # the op or module class that owns the time
    shape: dict[str, int]
    dtype: str | None
    args: dict[str, object]
    ms: float  # per forward
    calls: int  # per forward
    share: float  # of the profile's total
    where: list[str] = field(default_factory=list)  # module path patterns
    route: str = ""  # a generic row's route key: how verify finds the same call
    region: dict | None = None  # a generic target's traced description
    op: str = ""  # the first computing aten op: the row's name if it stays 'other'
    why: str = ""  # an 'other' row's: why the call it ran in is no target (a batched bmm)

    @property
    def is_target(self) -> bool:
        return self.kind in KERNEL_TYPES or (self.kind == GENERIC and self.region is not None)

    def amdahl(self, speedup: float) -> float:
        """End-to-end speedup if this row alone ran `speedup` times faster (inf: free)."""
        return amdahl([(self.share, speedup)])


@dataclass
class Profile:
    model: str
    device: str  # "cuda" or "cpu"
    dtype: str
    iterations: int
    rows: list[Row]  # ranked by time, targets and 'other' together
    total_ms: float  # per forward: CUDA kernel time, or CPU time of the forward
    attributed_ms: float  # per forward: the rows plus overhead, summed from self times
    profiler_total_ms: float  # per forward: the profiler's own total of self times
    overhead_ms: float  # per forward, CPU only: Python between ops
    wall_ms: float  # per forward, measured with a timer around the profiled loop
    compiled: CompiledFigures | None = None  # what torch.compile makes of the model
    compile_note: str = ""  # why there are no compiled figures
    notes: list[str] = field(default_factory=list)  # generic rows that could not be traced

    @property
    def targets(self) -> list[Row]:
        return [r for r in self.rows if r.is_target]

    @property
    def consistent(self) -> bool:
        """Nothing counted twice or lost: the attributed sum equals both totals."""
        tol = CHECK_TOLERANCE * max(self.total_ms, 1e-9)
        return (
            abs(self.attributed_ms - self.total_ms) <= tol
            and abs(self.attributed_ms - self.profiler_total_ms) <= tol
        )
