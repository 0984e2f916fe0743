"""benchmarks/ops.py in its CPU --smoke mode: the rows and files the H200 run will write, a
starter per op that matches the float64 replay, and two shards merged into one report."""

from __future__ import annotations

import datetime as dt
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
ROW_KEYS = {"op", "shape", "dtype", "variant", "us", "GBps", "rel_err", "note"}


def run(out: Path, *extra: str) -> dict:
    env = {**os.environ, "CUDA_VISIBLE_DEVICES": ""}
    proc = subprocess.run(
        [sys.executable, "-m", "benchmarks.ops", "--smoke", "--no-compile", "--out-dir", str(out),
         *extra],
        capture_output=True, text=True, timeout=900, env=env, cwd=ROOT,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return json.loads((out / "h200-ops-latest.json").read_text())


@pytest.mark.slow
def test_smoke_rows_starters_and_merged_shards(tmp_path):
    run(tmp_path, "--cases", "gelu_tanh,sum_middle,log_softmax", "--shard", "1/2")
    data = run(tmp_path, "--cases", "gelu_tanh,sum_middle,log_softmax", "--shard", "2/2",
               "--merge")  # fmt: skip
    assert {"gpu", "torch", "triton", "commit", "date", "rows"} <= set(data)
    rows = data["rows"]
    assert {r["op"] for r in rows} == {"gelu_tanh", "sum_middle", "log_softmax"}
    assert all(ROW_KEYS <= set(r) for r in rows)
    starters = [r for r in rows if r["variant"] == "starter"]
    assert len(starters) == 3 and all(r["us"] and r["rel_err"] < 1e-5 for r in starters)
    assert all(r["note"] == "" for r in starters)  # the static guard found nothing
    md = (tmp_path / f"h200-ops-{dt.date.today().isoformat()}.md").read_text()
    assert "| gelu_tanh |" in md and "| starter |" in md


def test_the_goal_lines_count_the_tuned_kernel_against_each_baseline():
    from benchmarks.ops import goals

    def v(us):
        return {"us": us}

    by_op = {
        "a": {"eager": v(10), "torch.compile": v(5), "starter": v(6), "tuned": v(4)},
        "b": {"eager": v(10), "torch.compile": v(5), "starter": v(8)},  # no tuned: starter
        "c": {"eager": v(10), "torch.compile": v(5), "starter": {"us": None}},  # not timed
    }
    eager, compiled = goals(by_op)[2:]
    assert eager == "- ours ≥ eager: 2 of 2 ops (goal: all)"
    assert compiled == "- ours ≥ torch.compile: 1 of 2 ops (goal: ≥ 80 %); below: b"
