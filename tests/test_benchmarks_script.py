"""benchmarks/kernels_vs_baselines.py in its CPU --smoke mode: the JSON schema and markdown the
device run will produce, and that wrong or broken kernels are reported, never dropped.

The script runs as a subprocess, as the lead runs it on the GPU machine; CUDA is hidden so the
CPU path (Triton interpreter, perf_counter medians) is the one exercised.
"""

from __future__ import annotations

import datetime as dt
import json
import math
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = [sys.executable, "-m", "benchmarks.kernels_vs_baselines"]
TYPES = (
    "matmul",
    "flash_attention",
    "fused_mlp",
    "softmax",
    "layernorm",
    "rmsnorm",
    "cross_entropy",
    "rotary_embedding",
    "reduce",
)
MEMORY = {"softmax", "layernorm", "rmsnorm", "cross_entropy", "rotary_embedding", "reduce"}
TOP_KEYS = {"gpu", "torch", "triton", "commit", "date", "rows"}
ROW_KEYS = {"op", "shape", "dtype", "variant", "us", "rel_err"}
FP32_TOL = 1e-4


def run_script(tmp_path: Path, *extra: str) -> tuple[dict, str, list[str]]:
    out, js = tmp_path / "report.md", tmp_path / "rows.json"
    cmd = [*SCRIPT, "--smoke", "--out", str(out), "--json", str(js)]
    cmd += ["--commit", "abc1234", "--results", str(tmp_path / "results"), *extra]
    env = {**os.environ, "CUDA_VISIBLE_DEVICES": ""}
    proc = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True, timeout=180)
    assert proc.returncode == 0, proc.stderr[-4000:]
    return json.loads(js.read_text()), out.read_text(), cmd


def check_schema(data: dict) -> list[dict]:
    """Exactly the keys issue 5 names; numbers finite and positive; a row without a time says
    why in its note."""
    assert set(data) == TOP_KEYS
    for key in ("gpu", "torch", "triton", "commit"):
        assert isinstance(data[key], str) and data[key]
    dt.date.fromisoformat(data["date"])
    rows = data["rows"]
    assert rows, "no rows"
    for row in rows:
        rate_keys = set(row) & {"GBps", "TFLOPS"}
        assert len(rate_keys) == 1, row
        assert set(row) - rate_keys - {"note"} == ROW_KEYS, row
        (rate_key,) = rate_keys
        assert row["op"] in (*TYPES, "copy"), row
        expected = "GBps" if row["op"] in MEMORY or row["op"] == "copy" else "TFLOPS"
        assert rate_key == expected, row
        assert re.fullmatch(r"\d+(x\d+)*( \w+=\d+)*", row["shape"]), row
        assert row["dtype"] in ("float16", "bfloat16", "float32"), row
        assert isinstance(row["variant"], str) and row["variant"], row
        if row["us"] is None:
            assert row[rate_key] is None and row.get("note"), row
        else:
            for key in ("us", rate_key):
                assert isinstance(row[key], float) and math.isfinite(row[key]), row
                assert row[key] > 0, row
        if row["rel_err"] is not None:
            assert math.isfinite(row["rel_err"]) and row["rel_err"] >= 0, row
        if "note" in row:
            assert isinstance(row["note"], str) and row["note"], row
    return rows


def pick(rows: list[dict], op: str, variant: str) -> dict:
    found = [r for r in rows if r["op"] == op and r["variant"] == variant]
    assert len(found) == 1, (op, variant, found)
    return found[0]


@pytest.fixture(scope="module")
def shipped(tmp_path_factory) -> tuple[dict, str, list[str]]:
    """Every type with the shipped starters: the interpreter runs each at its tiny bench size."""
    return run_script(tmp_path_factory.mktemp("shipped"), "--types", ",".join(TYPES))


@pytest.mark.slow
def test_rows_for_every_type_with_the_issue_schema(shipped):
    data, _, _ = shipped
    rows = check_schema(data)
    assert data["gpu"] == "cpu" and data["commit"] == "abc1234"
    assert rows[0]["op"] == "copy" and rows[0]["us"] > 0  # the machine's copy ceiling, first
    for op in TYPES:
        ours = pick(rows, op, "autokernel")
        assert ours["us"] > 0 and ours["dtype"] == "float32"
        assert ours["rel_err"] is not None and ours["rel_err"] < FP32_TOL, ours
        assert "WRONG" not in ours.get("note", "")
        eager = pick(rows, op, "eager")
        assert eager["us"] > 0 and eager["rel_err"] < FP32_TOL
        if op in MEMORY:
            assert pick(rows, op, "copy ceiling")["GBps"] > 0
    # --smoke leaves torch.compile out (it says so in the markdown); Liger needs CUDA.
    assert not [r for r in rows if r["variant"] in ("torch.compile max-autotune", "Liger-Kernel")]


@pytest.mark.slow
def test_markdown_states_command_goals_and_one_table_per_type(shipped):
    _, md, cmd = shipped
    assert " ".join(["python", *cmd[1:]]) in md  # the exact command (interpreter path aside)
    assert "commit: abc1234" in md and "CPU smoke run" in md
    goals = md.split("## Goals (issues 5 and 13)", 1)[1].split("\n## ", 1)[0]
    verdicts = re.findall(
        r"^\d+\. \*\*(met|not met|no figure|met where measured[^*]*)\*\*", goals, re.M
    )
    assert len(verdicts) == 11, goals  # ten kernel goals and loop speed, none left out
    assert "softmax 64x1024 float32: autokernel" in goals
    assert "Loop speed" in goals and "not measured by this script" in goals
    assert "Our rows that are wrong or have no figure: none." in goals
    for op in TYPES:
        assert f"\n## {op}\n" in md
    assert "torch.compile: left out (--smoke)" in md


WRONG_SOFTMAX = """
import torch
KERNEL_TYPE = "softmax"
def kernel_fn(x):
    return torch.softmax(x.float(), dim=-1).to(x.dtype) * 1.5  # planted: 50 % too large
"""
RIGHT_SOFTMAX = """
import torch
KERNEL_TYPE = "softmax"
def kernel_fn(x):
    return torch.softmax(x.float(), dim=-1).to(x.dtype)
"""
WRONG_RMSNORM = """
import torch
KERNEL_TYPE = "rmsnorm"
def kernel_fn(x, weight, eps=1e-6):
    return 2 * x * weight  # planted: no normalization, doubled
"""
WRONG_SHAPE_REDUCE = """
KERNEL_TYPE = "reduce"
def kernel_fn(x):
    return x  # planted: the row sums are missing
"""
RAISING_LAYERNORM = """
KERNEL_TYPE = "layernorm"
def kernel_fn(x, weight, bias, eps=1e-5):
    raise RuntimeError("planted failure")
"""


@pytest.mark.slow
def test_wrong_and_broken_kernels_are_reported_not_dropped(tmp_path):
    kernels = tmp_path / "kernels"
    kernels.mkdir()
    (kernels / "softmax.py").write_text(WRONG_SOFTMAX)
    (kernels / "softmax_fixed.py").write_text(RIGHT_SOFTMAX)
    (kernels / "rmsnorm.py").write_text(WRONG_RMSNORM)
    (kernels / "reduce.py").write_text(WRONG_SHAPE_REDUCE)
    (kernels / "layernorm.py").write_text(RAISING_LAYERNORM)
    types = "softmax,rmsnorm,reduce,layernorm,rotary_embedding"  # rotary: no file at all
    data, md, _ = run_script(tmp_path, "--types", types, "--kernels-dir", str(kernels))
    rows = check_schema(data)

    wrong = pick(rows, "softmax", "autokernel")
    assert wrong["us"] > 0 and wrong["rel_err"] > 0.1 and wrong["note"].startswith("WRONG")
    fixed = pick(rows, "softmax", "autokernel:softmax_fixed")
    assert fixed["rel_err"] < FP32_TOL and "WRONG" not in fixed.get("note", "")
    assert pick(rows, "rmsnorm", "autokernel")["rel_err"] > 0.1
    shape = pick(rows, "reduce", "autokernel")
    assert shape["rel_err"] is None and "shape" in shape["note"]
    raised = pick(rows, "layernorm", "autokernel")
    assert raised["us"] is None and "planted failure" in raised["note"]
    missing = pick(rows, "rotary_embedding", "autokernel")
    assert missing["us"] is None and "no kernel file" in missing["note"]

    assert md.count("**WRONG**") >= 3  # softmax, rmsnorm, reduce in their tables
    flagged = md.split("Our rows that are wrong or have no figure:", 1)[1].split("\n", 1)[0]
    for what in ("softmax 64x1024 float32 autokernel:", "rmsnorm", "reduce", "layernorm", "rotary"):
        assert what in flagged
    # The goals use the correct file for softmax and give the others no figure, with the reason.
    assert "softmax 64x1024 float32: autokernel:softmax_fixed" in md
    assert re.search(r"no figure: rmsnorm 64x1024 float32: autokernel: WRONG", md)


@pytest.mark.slow
def test_budget_cut_still_writes_both_files_and_says_what_was_skipped(tmp_path):
    data, md, _ = run_script(tmp_path, "--types", "softmax,matmul", "--budget-s", "0")
    rows = check_schema(data)
    assert rows and all(r["us"] is None and "budget" in r["note"] for r in rows)
    assert {r["op"] for r in rows} == {"copy", "softmax", "matmul"}
    assert "skipped: budget" in md and "## Goals (issues 5 and 13)" in md
    # the run is recorded: one history line (rows, versions, commit, command) and latest.md
    (entry,) = [json.loads(line) for line in (tmp_path / "results/cpu.jsonl").open()]
    assert entry["question"] == "kernels_vs_baselines" and entry["commit"] == "abc1234"
    assert entry["rows"] == data["rows"] and entry["markdown"] == md
    assert entry["command"].startswith("python -m benchmarks.kernels_vs_baselines --smoke")
    assert {"date", "gpu", "torch", "triton", "python"} <= set(entry)
    assert "## cpu: kernels_vs_baselines" in (tmp_path / "results/latest.md").read_text()


@pytest.mark.slow
def test_unknown_type_is_refused(tmp_path):
    cmd = [*SCRIPT, "--smoke", "--out", str(tmp_path / "r.md")]
    proc = subprocess.run(
        [*cmd, "--types", "softmax,nope"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "CUDA_VISIBLE_DEVICES": ""},
    )
    assert proc.returncode == 2 and "nope" in proc.stderr
    assert not (tmp_path / "r.md").exists()


@pytest.mark.slow
def test_harness_diag_probes_run_on_the_interpreter_and_refuse_unknown_ones():
    # The H200 figures in benchmarks/results/h200-diag-* come from this script: it must run.
    env = {**os.environ, "CUDA_VISIBLE_DEVICES": ""}
    run = [sys.executable, "-m", "benchmarks.harness_diag"]
    proc = subprocess.run([*run, "hostprof"], cwd=ROOT, capture_output=True, text=True,
                          timeout=300, env=env)  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-2000:]
    for kind in ("reduce", "layernorm", "softmax"):
        assert re.search(rf"{kind}: host per call under cProfile [\d.]+ us", proc.stdout)
    bad = subprocess.run([*run, "nope"], cwd=ROOT, capture_output=True, text=True, timeout=60,
                         env=env)  # fmt: skip
    assert bad.returncode == 2 and "usage:" in bad.stderr
