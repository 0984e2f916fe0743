"""What benchmarks/kernels_vs_baselines.py measures and in what order: the sizes issue 5's goals
name (Case), the device plan that puts headline sizes first, the rows every variant produces,
and the run's settings and time budget.

Why this module comes first: it is the one every other bench_* module builds on, and it settles
the environment before anything loads triton. Without CUDA the kernels must run under the Triton
interpreter, and TRITON_INTERPRET is only honoured if it is set before triton or any kernel file
is imported; the script imports this module before the others for that reason.
"""

from __future__ import annotations

import contextlib
import os
import signal
import time
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import torch

ON_GPU = torch.cuda.is_available()
if not ON_GPU:
    os.environ["TRITON_INTERPRET"] = "1"  # before triton or any kernel file is imported

ROOT = Path(__file__).resolve().parents[1]

from autokernel.specs import SPECS, KernelSpec, dtype_name  # noqa: E402

OURS, EAGER, COMPILE, LIGER, COPY = (
    "autokernel",
    "eager",
    "torch.compile max-autotune",
    "Liger-Kernel",
    "copy ceiling",
)
BASELINES = (EAGER, COMPILE, LIGER)

EAGER_NOTES = {
    "matmul": "cuBLAS torch.matmul",
    "flash_attention": "SDPA, flash backend forced",
    "fused_mlp": "3 cuBLAS linears + SwiGLU elementwise",
    "softmax": "torch.softmax",
    "layernorm": "F.layer_norm",
    "rmsnorm": "F.rms_norm",
    "cross_entropy": "F.cross_entropy",
    "rotary_embedding": "HF LLaMA rotate_half (4 elementwise kernels)",
    "reduce": "torch.sum",
}


class BudgetExceeded(BaseException):
    """--budget-s ran out in the middle of a step. A BaseException, so that library code that
    catches Exception (inductor's autotuner does) cannot swallow it."""


@dataclass(frozen=True)
class Case:
    """One size of one type, and which goals of issue 5 it serves."""

    op: str
    size: Mapping[str, int]
    dtype: torch.dtype
    llm: bool = False  # LLM-scale memory-bound size: the >= 90 % of copy goal applies
    goal: str = ""  # softmax_wide, ce_wide, narrow, matmul_square|llama|odd, attention, mlp
    what: str = ""  # where the shape comes from
    only: tuple[str, ...] = ()  # run only these variants (the late compile pass)

    @property
    def spec(self) -> KernelSpec:
        return SPECS[self.op]

    @property
    def shape(self) -> str:
        return self.spec.label(self.size)

    @property
    def key(self) -> tuple[str, str, str]:
        return (self.op, self.shape, dtype_name(self.dtype))


def _rc(rows: int, cols: int) -> dict[str, int]:
    return {"rows": rows, "cols": cols}


def _mm(m: int, n: int, k: int) -> dict[str, int]:
    return {"M": m, "N": n, "K": k}


def _attn(b: int, hq: int, hkv: int, s: int) -> dict[str, int]:
    return {"batch": b, "heads": hq, "kv_heads": hkv, "seq": s, "head_dim": 128}


BF16, FP16 = torch.bfloat16, torch.float16
LLAMA = "LLaMA-style example's linear at LLaMA-3-8B width, 4096 tokens"
# Headline size of each type first: if the budget runs out, every type still has its main row.
HEADLINE: tuple[Case, ...] = (
    Case("softmax", _rc(4096, 50257), FP16, True, "softmax_wide", "GPT-2 vocabulary"),
    Case("cross_entropy", {"rows": 8192, "vocab": 128256}, BF16, True, "ce_wide", "LLaMA-3 vocab"),
    Case("rmsnorm", _rc(16384, 8192), BF16, True),
    Case("matmul", _mm(4096, 4096, 4096), BF16, goal="matmul_square", what="also q/o_proj"),
    Case("flash_attention", _attn(2, 32, 32, 4096), BF16, goal="attention", what="causal"),
    Case("layernorm", _rc(16384, 8192), BF16, True),
    Case("rotary_embedding", {"batch": 4, "heads": 32, "seq": 4096, "head_dim": 128}, BF16, True),
    Case("reduce", _rc(16384, 8192), BF16, True),
    Case("fused_mlp", {"M": 4096, "hidden": 4096, "inter": 11008}, BF16, goal="mlp"),
)
COMPUTE_REST: tuple[Case, ...] = (
    Case("matmul", _mm(4096, 1024, 4096), BF16, goal="matmul_llama", what=f"k/v_proj, {LLAMA}"),
    Case("matmul", _mm(4096, 14336, 4096), BF16, goal="matmul_llama", what=f"gate/up, {LLAMA}"),
    Case("matmul", _mm(4096, 4096, 14336), BF16, goal="matmul_llama", what=f"down, {LLAMA}"),
    Case("matmul", _mm(4096, 128256, 4096), BF16, goal="matmul_llama", what=f"lm_head, {LLAMA}"),
    Case("matmul", _mm(4095, 4097, 4096), BF16, goal="matmul_odd", what="no tile divides M or N"),
    Case("matmul", _mm(4096, 50257, 768), BF16, goal="matmul_odd", what="GPT-2 lm_head, N odd"),
    Case("flash_attention", _attn(4, 32, 32, 2048), BF16, goal="attention", what="causal"),
    Case("flash_attention", _attn(1, 32, 32, 8192), BF16, goal="attention", what="causal"),
    Case("flash_attention", _attn(2, 32, 8, 4096), BF16, goal="attention", what="causal, GQA"),
    Case("fused_mlp", {"M": 8192, "hidden": 4096, "inter": 14336}, BF16, goal="mlp"),
)
MEMORY_REST: tuple[Case, ...] = (
    *(
        c
        for op in ("softmax", "rmsnorm", "layernorm", "reduce")
        for c in (
            Case(op, _rc(32768, 128), BF16, False, "narrow", "narrow rows"),
            Case(op, _rc(262144, 128), BF16, True, "narrow", "narrow rows, LLM scale"),
            Case(
                op,
                _rc(16384 if op == "softmax" else 4096, 8192 if op == "softmax" else 50257),
                BF16,
                True,
            ),
        )
    ),
    Case("cross_entropy", {"rows": 8192, "vocab": 50257}, BF16, True),
    Case("cross_entropy", {"rows": 16384, "vocab": 32000}, BF16, True),
    Case("rotary_embedding", {"batch": 1, "heads": 32, "seq": 16384, "head_dim": 128}, BF16, True),
)
CASES: tuple[Case, ...] = (*HEADLINE, *COMPUTE_REST, *MEMORY_REST)
OPS: tuple[str, ...] = tuple(dict.fromkeys(c.op for c in HEADLINE))


def gpu_plan(with_compile: bool) -> list[Case]:
    """Headlines (with torch.compile for the memory-bound ones: their goals compare with it);
    the other compute-bound sizes (cheap, named by goals); the other memory-bound sizes without
    torch.compile, then with it (a cold max-autotune compile costs more than all the rest of a
    size); last torch.compile of the compute-bound types, which no goal names."""
    plan = [*HEADLINE, *COMPUTE_REST]
    if not with_compile:
        return plan + list(MEMORY_REST)
    plan += [replace(c, only=(OURS, EAGER, COPY, LIGER)) for c in MEMORY_REST]
    plan += [replace(c, only=(COMPILE,)) for c in MEMORY_REST]
    return plan + [replace(c, only=(COMPILE,)) for c in CASES if c.spec.bound == "compute"]


def smoke_plan() -> list[Case]:
    """One interpreter-sized case per type (fp32: the interpreter has no bf16 arithmetic)."""
    return [
        replace(c, size=c.spec.cpu.bench[0], dtype=torch.float32, what="CPU smoke size")
        for c in HEADLINE
    ]


@dataclass
class Row:
    op: str
    shape: str
    dtype: str
    variant: str
    us: float | None
    rate: float | None  # GB/s for memory-bound types and copies, else TFLOPS
    rate_key: str  # "GBps" or "TFLOPS"
    rel_err: float | None
    note: str = ""
    wrong: bool = False  # rel err above the dtype's tolerance, or no comparable output

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "op": self.op,
            "shape": self.shape,
            "dtype": self.dtype,
            "variant": self.variant,
            "us": _round(self.us),
            self.rate_key: _round(self.rate),
            "rel_err": self.rel_err,
        }
        if self.note:
            out["note"] = self.note
        return out


def _round(x: float | None) -> float | None:
    return None if x is None else float(f"{x:.5g}")


def _rate(case: Case, us: float) -> float:
    spec = case.spec
    if spec.bound == "memory":
        return spec.bytes_moved(case.size, case.dtype) / us / 1e3
    return spec.flops(case.size) / us / 1e6


def case_row(
    case: Case,
    variant: str,
    us: float | None = None,
    err: float | None = None,
    note: str = "",
    wrong: bool = False,
) -> Row:
    """A row of this case: GB/s for a memory-bound type, TFLOPS otherwise; no time, no rate."""
    rate_key = "GBps" if case.spec.bound == "memory" else "TFLOPS"
    rate = None if us is None else _rate(case, us)
    return Row(*case.key, variant, us, rate, rate_key, err, note, wrong)


@dataclass
class Run:
    """Settings and everything measured so far. t0 is when the script started, so that imports
    and CUDA start-up count against --budget-s."""

    out: Path
    json_path: Path
    commit: str
    kernels_dir: Path
    budget_s: float
    smoke: bool
    with_compile: bool
    plan: list[Case]
    t0: float = field(default_factory=time.perf_counter)
    rows: list[Row] = field(default_factory=list)
    device: torch.device = field(default_factory=lambda: torch.device("cuda" if ON_GPU else "cpu"))
    kernels: dict[str, list[tuple[str, Callable | None, str]]] = field(default_factory=dict)

    def left(self) -> float:
        return self.budget_s - (time.perf_counter() - self.t0)


@contextlib.contextmanager
def deadline(seconds: float) -> Iterator[None]:
    """Raise BudgetExceeded in the main thread after `seconds` (a hung compile or a slow
    reference must not take the whole device call with it)."""
    if seconds <= 0:
        raise BudgetExceeded
    if not hasattr(signal, "SIGALRM"):
        yield
        return

    def _fire(*_: object) -> None:
        raise BudgetExceeded

    old = signal.signal(signal.SIGALRM, _fire)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, old)
