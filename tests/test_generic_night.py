"""profile -> run (tuner, a fixed budget) -> verify with no manual step, on single-op problem
files whose ops no kernel type computes: the real CLI, sandboxed harness and git, on the
Triton interpreter (so the files are tiny)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

CLI = [sys.executable, "-m", "autokernel.cli"]
PROBLEM = """
import torch
from torch import nn


class Model(nn.Module):
    def forward(self, x):
        return {forward}


def get_inputs():
    return [torch.randn({shape}, generator=torch.Generator().manual_seed(0))]


def get_init_inputs():
    return []
"""


def autokernel(cwd: Path, *args: str, timeout: float = 900) -> subprocess.CompletedProcess:
    return subprocess.run(
        [*CLI, *args], cwd=cwd, capture_output=True, text=True, timeout=timeout,
        env={**os.environ, "COLUMNS": "200"},
    )  # fmt: skip


@pytest.mark.slow
@pytest.mark.parametrize(
    ("forward", "shape", "target"),
    [
        ("torch.log_softmax(x, dim=-1)", "4, 64", "log_softmax"),
        ("x / torch.sqrt(torch.mean(x ** 2, dim=1, keepdim=True) + 1e-6)", "2, 8, 2, 4",
         "Model"),
    ],
)  # fmt: skip
def test_profile_run_verify_a_generic_target(tmp_path, forward, shape, target):
    problem = tmp_path / "problem.py"
    problem.write_text(PROBLEM.format(forward=forward, shape=shape))
    ws = tmp_path / "ws"
    ws.mkdir()
    out = autokernel(ws, "profile", str(problem), "--iters", "1", "--warmup", "1")
    assert out.returncode == 0, out.stdout + out.stderr
    assert f"generic: {target}" in out.stdout or f"generic: torch.{target}" in out.stdout
    out = autokernel(ws, "run", "--max-experiments", "2", "--quick", "--quiet")
    assert out.returncode == 0, out.stdout + out.stderr
    assert f"exp 0 [{target}] keep" in out.stdout, out.stdout
    out = autokernel(ws, "verify", str(problem), "--no-compile", "--rounds", "1",
                     "--json", str(ws / "verify.json"))  # fmt: skip
    assert out.returncode == 0, out.stdout + out.stderr
    result = json.loads((ws / "verify.json").read_text())
    assert result["ok"] and result["calls"][target]["kernel"] >= 1, result["calls"]
    assert "Traceback" not in out.stderr
