"""benchmarks/config_sweep.py on the CPU: every combination of the grid becomes a row, the best
correct one is named, and a config that cannot run is a row with its error, not a crash."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.slow
def test_sweep_rows_best_and_failures(tmp_path):
    jobs = [
        {
            "type": "softmax",
            "size": {"rows": 4, "cols": 300},
            "dtype": "float32",
            # 96 is no power of two: tl.arange refuses it, so that config must fail as a row
            "grid": {"VARIANT": ["online"], "BLOCK_SIZE": [64, 96, 128]},
        }
    ]
    (tmp_path / "jobs.json").write_text(json.dumps(jobs))
    out = tmp_path / "out.json"
    env = {**os.environ, "CUDA_VISIBLE_DEVICES": ""}
    proc = subprocess.run(
        [sys.executable, "-m", "benchmarks.config_sweep", "--jobs",
         str(tmp_path / "jobs.json"), "--out", str(out), "--commit", "test"],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=600,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-3000:]
    data = json.loads(out.read_text())
    assert data["commit"] == "test" and data["gpu"].startswith("cpu")
    (job,) = data["jobs"]
    assert job["type"] == "softmax" and job["shape"] == "4x300" and job["dtype"] == "float32"
    by_block = {r["config"]["BLOCK_SIZE"]: r for r in job["rows"]}
    assert sorted(by_block) == [64, 96, 128]
    assert by_block[96]["note"].startswith("failed:") and "us" not in by_block[96]
    for block in (64, 128):
        row = by_block[block]
        assert "note" not in row and row["rel_err"] < 1e-4 and row["us"] > 0 and row["GBps"] >= 0
    fastest = min((by_block[64], by_block[128]), key=lambda r: r["us"])
    assert job["best"] == fastest
