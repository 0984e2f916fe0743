"""The judge's stages and benchmark run on a trusted kernel in this very process.

For diagnostics of the harness itself (benchmarks/harness_diag.py profiles the stages of our own
starters) a process boundary only adds noise. LocalProcess drives the same serve.Session the
worker runs, and hands outputs over through the same encode/decode as the channel, so what is
measured is what an evaluation does, minus the pipe. Never use it for candidate code: the
judge and the kernel share a process here.
"""

from __future__ import annotations

import tempfile
import time
from pathlib import Path
from types import ModuleType
from typing import Any

import torch

from autokernel.harness.channel import decode_tensor, output_bound
from autokernel.harness.serve import Session
from autokernel.harness.stages import Call, Evaluation, StageFailure
from autokernel.harness.verdict import Check, Status
from autokernel.specs import KernelSpec, dtype_name
from autokernel.timing import Measurement


class LocalProcess:
    """stages.Caller and benchmark.KernelProcess over trusted modules, in process."""

    def __init__(self, spec: KernelSpec, modules: list[ModuleType], device: torch.device,
                 seed: int) -> None:  # fmt: skip
        self.work = Path(tempfile.mkdtemp(prefix="autokernel-local-"))
        self.session = Session(spec, device, seed, self.work, monitor=True)
        self.session.modules = list(modules)
        self.session.kernels = [m.kernel_fn for m in modules]
        self.spec, self.device = spec, device
        self.max_bytes = 0  # the last call's output bound (channel.output_bound)

    def evaluation(self, **fields: Any) -> Evaluation:
        return Evaluation(self.spec, self.device, self.session.seed, call=self.call, **fields)

    def _out(self, reply: dict[str, Any], check: Check) -> torch.Tensor:
        if "status" in reply:
            check.message = reply["message"]
            raise StageFailure(Status(reply["status"]), check)
        return decode_tensor(reply["out"], self.work, self.device, self.max_bytes)

    def call(self, c: Call) -> tuple[torch.Tensor, float]:
        self.max_bytes = output_bound(c.out_shape, c.out_dtype)
        t0 = time.monotonic()
        reply = self.session.call({
            "make": c.make, "size": dict(c.size), "dtype": dtype_name(c.dtype),
            "key": list(c.key), "out_shape": list(c.out_shape),
            "out_dtype": dtype_name(c.out_dtype), "role": c.role,
        })  # fmt: skip
        seconds = time.monotonic() - t0
        check = Check(c.stage, self.spec.label(c.size), dtype_name(c.dtype), False)
        return self._out(reply, check), seconds

    def measure(self, role: int, label: str, dtype: torch.dtype) -> Measurement:
        reply = self.session.time({"role": role})
        if "status" in reply:
            check = Check("benchmark", label, dtype_name(dtype), False, reply["message"])
            raise StageFailure(Status(reply["status"]), check)
        return Measurement(reply["median_us"], reply["p20_us"], reply["p80_us"])

    def refill(self, key: tuple) -> None:
        self.session.refill(key)

    def batch(self, role: int, calls: int, check_at: int) -> float:
        t0 = time.monotonic()
        self.session.batch({"role": role, "calls": calls, "check_at": check_at})
        return time.monotonic() - t0

    def output(self) -> torch.Tensor:
        return self._out(self.session.output(), Check("benchmark", "", "", False))

    def rounds(self, rounds: int, label: str) -> dict[str, Any]:
        return self.session.rounds(
            {"rounds": rounds, "label": label, "roles": ["best", "candidate"]}, lambda p: None
        )
