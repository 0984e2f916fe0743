"""benchmarks/cuda_backend.py's pure-Python parts on the CPU: rows, goals, the written files,
and that a failing step is recorded while the rest goes on."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "benchmarks"))

import cuda_backend  # noqa: E402
import cuda_backend_report as rep  # noqa: E402

from autokernel.harness.verdict import StageResult, Status, Timing, Verdict  # noqa: E402

MEMORY = {"rmsnorm"}


def _report() -> rep.Report:
    r = rep.Report("NVIDIA H200", "2.11.0", "3.6.0", "13.0.88", "abc1234", "2026-12-04", "cmd")
    r.rows = [
        rep.Row("rmsnorm", "16384x8192", "bfloat16", rep.CUDA, "cuda", 100.0, 4000.0, "GBps", 1e-3),
        rep.Row("rmsnorm", "16384x8192", "bfloat16", "copy ceiling", "torch", 90.0, 4400.0, "GBps"),
        rep.Row("rmsnorm", "4096x50257", "bfloat16", rep.CUDA, "cuda", 200.0, 2000.0, "GBps"),
        rep.Row("rmsnorm", "4096x50257", "bfloat16", "copy ceiling", "torch", 100.0, 4000.0,
                "GBps"),
        rep.Row("matmul", "4096x4096x4096", "bfloat16", rep.CUDA, "cuda", 300.0, 458.0, "TFLOPS"),
        rep.Row("matmul", "4096x4096x4096", "bfloat16", "eager", "torch", 190.0, 723.0, "TFLOPS"),
    ]  # fmt: skip
    r.builds = {"rmsnorm": {"cold_s": 3.2, "cached_s": 0.01}, "matmul": {"cold_s": 75.0}}
    return r


def test_goals_are_judged_from_the_rows_and_builds():
    lines = rep.goals(_report(), MEMORY)
    assert "rmsnorm 16384x8192: 90% of the copy ceiling (goal 85%): met" in lines
    assert "rmsnorm 4096x50257: 50% of the copy ceiling (goal 85%): not met" in lines
    assert "matmul 4096x4096x4096 bf16: 63% of cuBLAS (goal 70%): not met" in lines
    assert "rmsnorm cached load: 0.01 s (goal <= 1 s): met" in lines
    assert "matmul cold build: 75.00 s (goal <= 60 s): not met" in lines
    assert "matmul cached load: no figure" in lines


def test_a_failing_step_is_recorded_and_the_next_one_runs():
    report = _report()
    ran = []

    def broken():
        raise RuntimeError("CUDA error: an illegal memory access was encountered")

    assert rep.guarded(report, "softmax timing", broken) is None
    assert rep.guarded(report, "reduce timing", lambda: ran.append(1) or 7) == 7
    assert ran == [1]
    (error,) = report.errors
    assert error.startswith("softmax timing: RuntimeError: CUDA error: an illegal memory access")
    assert "test_cuda_backend_bench.py:" in error  # where it was raised


def test_both_files_are_written_with_backend_rows_and_verdicts(tmp_path):
    report = _report()
    verdict = Verdict(status=Status.FAIL, message="FAIL in smoke: CUDA build failed: nvcc: ...",
                      stages=[StageResult("smoke", "FAIL"), StageResult("sweep", "SKIPPED")],
                      builds=[{"cached": False, "compile_s": 2.5, "seconds": 2.6}],
                      timings=[Timing("64x1024", "bfloat16", 5.0, 0.1, 4.0, None, 900.0, "GB/s",
                                      20.0, 0.8, None)])  # fmt: skip
    report.verdicts["softmax"] = rep.verdict_summary(verdict)
    report.errors.append("softmax timing: RuntimeError: boom")
    md, js = rep.write(report, tmp_path / "out", MEMORY)
    assert md.name == "h200-cuda-2026-12-04.md" and js.name == "h200-cuda-latest.json"
    data = json.loads(js.read_text())
    assert {"gpu", "torch", "triton", "nvcc", "commit", "date", "rows", "verdicts"} <= set(data)
    row = data["rows"][0]
    assert row["backend"] == "cuda" and row["GBps"] == 4000.0 and row["variant"] == rep.CUDA
    v = data["verdicts"]["softmax"]
    assert v["status"] == "FAIL" and v["build_s"] == 2.6 and v["stages"][0]["status"] == "FAIL"
    text = md.read_text()
    assert "| softmax | FAIL | smoke:FAIL sweep:SKIPPED |" in text
    assert "softmax timing: RuntimeError: boom" in text and "## Goals (issue 17)" in text


def test_without_a_gpu_the_script_says_so_and_exits_2(tmp_path, monkeypatch, capsys):
    monkeypatch.setattr(sys, "argv", ["cuda_backend.py", str(tmp_path)])
    if cuda_backend.torch.cuda.is_available():
        pytest.skip("this machine has a GPU")
    assert cuda_backend.main() == 2
    assert "no GPU" in capsys.readouterr().err
    assert not list(tmp_path.iterdir())


def test_cold_builds_record_each_starter_and_survive_one_that_fails(tmp_path, monkeypatch):
    calls = []

    def fake_load(source, config):
        calls.append(source)
        if "IGNORE_INDEX" in source:  # the cross_entropy source
            raise cuda_backend.cuda_build.CudaBuildError("nvcc: line 3: error: planted")

    monkeypatch.setattr(cuda_backend.cuda_build, "cached_cubin", lambda s, c: tmp_path / "x")
    monkeypatch.setattr(cuda_backend.cuda_build, "load", fake_load)
    report = _report()
    report.builds = {}
    cuda_backend.cold_builds(report, ["rmsnorm", "cross_entropy", "matmul"])
    assert sorted(report.builds) == ["matmul", "rmsnorm"]
    assert all(b["cold_s"] >= 0 and b["cached_s"] >= 0 for b in report.builds.values())
    (error,) = report.errors
    assert error.startswith("cross_entropy build: CudaBuildError: nvcc: line 3: error: planted")
    assert len(calls) == 5  # cold and cached for the two that built, one failed attempt


def test_the_timing_plan_measures_the_goal_figures_first():
    """A budget that runs out must cut the comparisons, not the figures the goals are judged
    by: every CUDA starter at every benchmark size with its ceiling, before any Triton run."""
    plan = cuda_backend.timing_plan(list(cuda_backend.TYPES))
    assert plan[0] == ("matmul", cuda_backend.MATMUL_GOAL, (rep.CUDA, "eager"))
    assert plan[1][:2] == ("matmul", {"M": 4095, "N": 4097, "K": 4096})
    first_triton = next(i for i, step in enumerate(plan) if rep.TRITON in step[2])
    for kind in cuda_backend.TYPES:
        spec = cuda_backend.get_spec(kind)
        if spec.bound != "memory":
            continue
        for size in spec.gpu.bench:
            step = (kind, size, (rep.CUDA, cuda_backend.COPY))
            assert step in plan and plan.index(step) < first_triton, step
            assert (kind, size, (rep.TRITON, "eager")) in plan
    matmul_sizes = [s for k, s, v in plan if k == "matmul" and rep.CUDA in v]
    assert len(matmul_sizes) == len(set(map(str, matmul_sizes)))  # each timed once
