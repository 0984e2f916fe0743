"""benchmarks/judge_margins.py, the GPU run's view of how far honest kernels stay from the
judge's wall-clock limit, must run (here on the interpreter, at the CPU sizes)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).parents[1]
SCRIPT = [sys.executable, "-m", "benchmarks.judge_margins"]


@pytest.mark.slow
def test_an_honest_kernel_stays_under_the_wall_limit_and_the_table_prints():
    env = {**os.environ, "CUDA_VISIBLE_DEVICES": "", "PYTHONPATH": str(ROOT)}
    proc = subprocess.run([*SCRIPT, "--types", "reduce", "--quick"], cwd=ROOT,
                          capture_output=True, text=True, timeout=900, env=env)  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-2000:]
    [row] = [json.loads(line) for line in proc.stdout.splitlines() if line.startswith("{")]
    assert row["status"] == "PASS" and row["size"] == "64x1024"
    assert 0 < row["wall_over_limit"] < 1
    assert "| reduce | PASS | 64x1024 |" in proc.stdout


@pytest.mark.slow
def test_an_unknown_type_is_a_one_line_error():
    proc = subprocess.run([*SCRIPT, "--types", "convolution"], cwd=ROOT,
                          capture_output=True, text=True, timeout=300)  # fmt: skip
    assert proc.returncode == 2 and "unknown kernel type 'convolution'" in proc.stderr
