"""benchmarks/ops.py in its CPU --smoke mode: the rows and files the H200 run will write, a
starter per op that matches the float64 replay, two shards merged into one report, and each run
recorded through benchmarks/runner.py as a line of the GPU's history."""

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
         "--results", str(out / "hist"), "--commit", "abc1234", *extra],
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
    lines = [json.loads(x) for x in (tmp_path / "hist" / "cpu.jsonl").read_text().splitlines()]
    assert [e["question"] for e in lines] == ["ops", "ops"]  # one line per shard
    assert lines[-1]["rows"] == rows and lines[-1]["commit"] == "abc1234"


def test_each_run_is_a_history_line_beside_the_latest_json(tmp_path, monkeypatch):
    """The recording alone, with the measuring stubbed: each shard appends its line, the merged
    one carries every op's rows, and <prefix>-latest.json (which other work reads) stays."""
    from benchmarks import ops

    def fake_case(case, args, folder, phase="all"):
        variant = "eager" if phase == "baselines" else "starter"
        row = {"op": case.name, "shape": "8x8", "dtype": "float32", "what": case.what}
        return [{**row, "variant": variant, "us": 2.0, "GBps": 1.0, "rel_err": 0.0, "note": ""}]

    monkeypatch.setattr(ops, "run_case", fake_case)
    hist = tmp_path / "hist"
    common = ["--smoke", "--no-compile", "--cases", "gelu_tanh,log_softmax", "--out-dir",
              str(tmp_path), "--results", str(hist), "--commit", "abc1234"]  # fmt: skip
    assert ops.main([*common, "--shard", "1/2"]) == 0
    assert ops.main([*common, "--shard", "2/2", "--merge"]) == 0
    lines = [json.loads(x) for x in (hist / "cpu.jsonl").read_text().splitlines()]
    assert [e["question"] for e in lines] == ["ops", "ops"]
    assert {r["op"] for r in lines[0]["rows"]} == {"gelu_tanh"}
    assert [(r["op"], r["variant"]) for r in lines[1]["rows"]] == [
        ("gelu_tanh", "eager"), ("gelu_tanh", "starter"),
        ("log_softmax", "eager"), ("log_softmax", "starter"),
    ]  # fmt: skip
    assert lines[1]["commit"] == "abc1234" and "| log_softmax |" in lines[1]["markdown"]
    assert json.loads((tmp_path / "h200-ops-latest.json").read_text())["rows"] == lines[1]["rows"]
    assert "## cpu: ops" in (hist / "latest.md").read_text()


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
