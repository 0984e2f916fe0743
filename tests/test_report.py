"""autokernel report: per-target figures, the Amdahl estimate, Markdown/JSON, progress.png."""

from __future__ import annotations

import json
import shutil
import struct
import sys
from pathlib import Path

import pytest
import typer
from typer.testing import CliRunner

from autokernel import report as rep
from autokernel.cli.report import report_command
from autokernel.run import state as run_state
from autokernel.run.results import HEADER, ResultsLog
from autokernel.targets import Target
from autokernel.views import report as report_view

H200_TSV = (
    Path(__file__).resolve().parents[1] / "benchmarks/results/h200-run-softmax-2026-12-03.tsv"
)
PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


def _row(n, target, kind, status, agent, us=None, eager_us=None, compile_us=None, desc="x"):
    return {
        "experiment": n, "commit": f"c{n:03d}", "target": target, "kernel_type": kind,
        "status": status, "correctness": "PASS" if us else "FAIL", "latency_us": us,
        "speedup_vs_eager": eager_us / us if us and eager_us else None,
        "speedup_vs_compile": compile_us / us if us and compile_us else None,
        "pct_peak": 40.0 * 100 / us if us else None, "harness_s": 10.0, "agent": agent,
        "tokens": 0, "description": desc,
    }  # fmt: skip


# matmul: eager 80 µs, compile 70 µs; rmsnorm: eager 40 µs, compile 30 µs; its starter's first
# timing (20 µs) is cold, two re-measurements of the unchanged starter give 16 and 18 µs.
SYNTHETIC = [
    _row(0, "matmul", "matmul", "keep", "starter", 100, 80, 70, "baseline: the shipped starter"),
    _row(1, "matmul", "matmul", "revert", "tuner", 110, 80, 70),
    _row(2, "matmul", "matmul", "keep", "tuner", 80, 80, 70, "BLOCK_M 64→128"),
    _row(3, "matmul", "matmul", "fail", "tuner"),
    _row(4, "matmul", "matmul", "crash", "tuner"),
    _row(5, "matmul", "matmul", "keep", "llm", 50, 80, 70, "split-K | persistent"),
    _row(6, "rmsnorm", "rmsnorm", "keep", "starter", 20, 40, 30, "baseline"),
    _row(7, "rmsnorm", "rmsnorm", "revert", "tuner", 21, 40, 30),
    _row(8, "rmsnorm", "rmsnorm", "keep", "best", 16, 40, 30, "round 2: re-measured"),
    _row(9, "rmsnorm", "rmsnorm", "keep", "best", 18, 40, 30, "round 3: re-measured"),
    _row(10, "rmsnorm", "rmsnorm", "timeout", "tuner"),
    _row(11, "rmsnorm", "rmsnorm", "rejected", "tuner"),
    _row(12, "rmsnorm", "rmsnorm", "keep", "tuner", 15, 40, 30, "[bold]num_warps 4→8"),
]


def _write_rows(root: Path, rows: list[dict]) -> None:
    log = ResultsLog(root / "results.tsv")
    for row in rows:
        log.append(row)


@pytest.fixture
def synthetic(tmp_path: Path) -> Path:
    _write_rows(tmp_path, SYNTHETIC)
    targets = [
        Target("matmul", "matmul", share=0.6),
        Target("rmsnorm", "rmsnorm", share=0.1),
        Target("softmax", "softmax", share=0.05),  # never reached: no rows
    ]
    state = run_state.new_state("night1", "tuner", 8.0, targets)
    mm, rms, _ = state.targets
    mm.status, mm.reason, mm.seconds = "done", "2.00x faster than eager PyTorch (rule: 2x)", 3600
    rms.status, rms.reason, rms.seconds = "active", "", 1800
    state.seconds = 5400.0
    run_state.save(state, tmp_path)
    return tmp_path


@pytest.fixture
def h200(tmp_path: Path) -> Path:
    shutil.copy(H200_TSV, tmp_path / "results.tsv")
    return tmp_path


def test_per_target_counts_best_and_speedups(synthetic):
    r = rep.build(synthetic)
    assert [t.name for t in r.targets] == ["matmul", "rmsnorm", "softmax"]  # by share
    mm, rms, sm = r.targets
    assert (mm.experiments, mm.kept, mm.reverted, mm.failed, mm.remeasured) == (6, 2, 1, 2, 0)
    assert mm.baseline_us == 100 and mm.best_us == 50 and mm.best_experiment == 5
    assert mm.speedup_vs_starter == pytest.approx(2.0)
    assert mm.speedup_vs_eager == pytest.approx(1.6)
    assert mm.speedup_vs_compile == pytest.approx(1.4)
    assert mm.pct_peak == pytest.approx(80.0)
    assert (mm.seconds, mm.seconds_source, mm.status) == (3600, "state", "done")
    assert "2.00x faster than eager" in mm.reason
    assert (rms.experiments, rms.kept, rms.reverted, rms.failed, rms.remeasured) == (7, 1, 1, 2, 2)
    assert (sm.experiments, sm.status, sm.best_us, sm.speedup_vs_eager) == (
        0,
        "pending",
        None,
        None,
    )


def test_baseline_prefers_the_median_of_starter_remeasurements(synthetic):
    rms = rep.build(synthetic).targets[1]
    assert rms.baseline_us == pytest.approx(17.0)  # median(16, 18), not the cold 20
    assert "median of 2 re-measurements" in rms.baseline_note and "exp 8, 9" in rms.baseline_note
    assert "20 µs" in rms.baseline_note
    assert rms.speedup_vs_starter == pytest.approx(17 / 15)
    assert rms.baseline_vs_eager == pytest.approx(_median_ratio(40, [16, 18]), rel=1e-4)


def _median_ratio(eager: float, us: list[float]) -> float:
    return (eager / us[0] + eager / us[1]) / 2


def test_amdahl_hand_computed(synthetic):
    r = rep.build(synthetic)
    # 1 / (0.6/1.6 + 0.1/(40/15) + 0.05/1 + 0.25): softmax has no speedup yet, counts as 1x
    assert r.amdahl == pytest.approx(1 / 0.7125)
    assert "assumes" in r.amdahl_note and "75%" in r.amdahl_note
    assert rep.amdahl([(0.6, 1.5)]) == pytest.approx(1 / (0.4 + 0.4))  # the 1.25x
    assert rep.amdahl([(0.05, 1.5)]) == pytest.approx(1.0169, abs=1e-4)
    # Overlapping shares (summing past 1) are scaled to 1: everything twice as fast is 2x, and
    # nothing faster is 1x, as prediction.amdahl (verify) says for the same night.
    assert rep.amdahl([(0.7, 2.0), (0.6, 2.0)]) == pytest.approx(2.0)
    assert rep.amdahl([(0.7, 1.0), (0.6, None)]) == pytest.approx(1.0)


def test_report_and_verify_agree_when_the_shares_sum_past_one(tmp_path):
    """Overlapping plan entries: the report's estimate and verify's prediction are the same
    figure (they used to differ: 1.54x against 2.0x for everything twice as fast)."""
    from autokernel.model.verify import prediction

    _write_rows(tmp_path, [_row(0, "a", "softmax", "keep", "starter", 10, 20),
                           _row(1, "b", "rmsnorm", "keep", "starter", 10, 20)])  # fmt: skip
    targets = [Target("a", "softmax", share=0.7), Target("b", "rmsnorm", share=0.6)]
    state = run_state.new_state("n", "tuner", 1.0, targets)
    for ts in state.targets:
        ts.best = run_state.Score(us=10.0, spread=0.0, speedup_vs_eager=2.0)
    run_state.save(state, tmp_path)
    report = rep.build(tmp_path, "eager")
    assert report.amdahl == pytest.approx(2.0)
    assert prediction.amdahl(tmp_path, {"a", "b"}) == pytest.approx(report.amdahl)
    assert "scaled to 1" in report.amdahl_note
    # verify's kept subset: the unused target's share still counts in the scale
    assert prediction.amdahl(tmp_path, {"a"}) == pytest.approx(
        rep.amdahl([(0.7, 2.0), (0.6, None)])
    )
    assert prediction.amdahl(tmp_path, {"a"}) == pytest.approx(1.3 / (0.35 + 0.6))


def test_amdahl_uses_the_models_own_time_where_the_plan_gives_it(synthetic):
    state = run_state.load(synthetic)
    rms = state.target("rmsnorm")
    # the model's RMSNorm took 300 µs a forward over 2 calls; the best kernel takes 15 µs a call
    rms.target = Target("rmsnorm", "rmsnorm", shapes=({"rows": 8, "cols": 64},), share=0.1,
                        calls=2, model_ms=0.3)  # fmt: skip
    run_state.save(state, synthetic)
    r = rep.build(synthetic)
    assert r.targets[1].speedup_in_model == pytest.approx(10.0)
    assert r.amdahl == pytest.approx(1 / (0.6 / 1.6 + 0.1 / 10 + 0.05 + 0.25))
    assert "model's own time" in r.amdahl_note


def test_top_kept_ranked_by_gain_over_the_best_they_replaced(synthetic):
    top = rep.build(synthetic).top_kept
    assert [(k.experiment, round(k.gain, 4)) for k in top] == [(5, 1.6), (2, 1.25), (12, 1.2)]
    assert top[0].description == "split-K | persistent"


def test_markdown_and_json(synthetic, tmp_path):
    r = rep.build(synthetic)
    md = report_view.to_markdown(r, synthetic / "progress.png")
    assert "| target | type | share | starter µs | best µs |" in md
    assert (
        "| matmul | matmul | 60% | 100 | 50 | 2.00 | 1.60 | 1.40 | 80 | 2 | 1 | 2 | 60 min |" in md
    )
    assert "split-K \\| persistent" in md  # a pipe in a hypothesis does not break the table
    assert "whole model (Amdahl): 1.404x vs eager" in md
    assert "![progress](progress.png)" in md
    data = json.loads(json.dumps(r.to_json()))
    assert data["tag"] == "night1" and data["amdahl"] == pytest.approx(1 / 0.7125)
    assert data["targets"][0]["points"][0] == {
        "experiment": 0,
        "status": "keep",
        "agent": "starter",
        "latency_us": 100.0,
        "speedup": 1.0,
    }


def test_without_state_file_no_estimate_and_harness_time(synthetic):
    (synthetic / run_state.STATE_FILE).unlink()
    r = rep.build(synthetic)
    assert r.amdahl is None and "unknown" in r.amdahl_note
    assert [t.name for t in r.targets] == ["matmul", "rmsnorm"]
    mm = r.targets[0]
    assert (mm.share, mm.seconds, mm.seconds_source, mm.status) == (
        None,
        60.0,
        "harness_s",
        "unknown",
    )
    assert "no state file" in " ".join(r.notes)


def test_damaged_state_file_falls_back_to_results(synthetic):
    (synthetic / run_state.STATE_FILE).write_text("{not json")
    r = rep.build(synthetic)
    assert r.amdahl is None and "unreadable" in r.notes[0]


def test_single_kernel_run_flags_the_default_share(h200):
    run_state.save(run_state.new_state("t", "tuner", 0.25, [Target("softmax", "softmax")]), h200)
    r = rep.build(h200)
    assert r.amdahl == pytest.approx(1.7861)
    assert "--kernel` default" in r.amdahl_note


def test_real_h200_run(h200):
    r = rep.build(h200)
    (sm,) = r.targets
    assert (sm.experiments, sm.kept, sm.reverted, sm.failed, sm.remeasured) == (88, 1, 78, 0, 8)
    # the cold first timing (144.19 µs) is replaced by the median of the 8 re-measurements
    assert sm.baseline_us == pytest.approx((129.13 + 129.2) / 2)
    assert sm.best_us == pytest.approx(126.36) and sm.best_experiment == 74
    assert sm.speedup_vs_starter == pytest.approx(129.165 / 126.36)
    assert (sm.speedup_vs_eager, sm.speedup_vs_compile, sm.pct_peak) == (1.7861, 1.4821, 72.388)
    assert [k.experiment for k in r.top_kept] == [74]
    assert r.top_kept[0].gain == pytest.approx(128.85 / 126.36)  # vs the re-measure just before


def _app() -> typer.Typer:
    app = typer.Typer()
    app.command()(report_command)
    return app


def test_nothing_to_report(tmp_path):
    result = CliRunner().invoke(_app(), ["--workspace", str(tmp_path)])
    assert result.exit_code == 2
    assert "run `autokernel run` first" in result.output
    (tmp_path / "results.tsv").write_text(HEADER)  # a run that has not finished exp 0
    with pytest.raises(rep.ReportError, match="no experiments yet"):
        rep.build(tmp_path)


def test_missing_matplotlib_still_reports_and_hints(synthetic, monkeypatch):
    for name in [m for m in sys.modules if m == "matplotlib" or m.startswith("matplotlib.")]:
        monkeypatch.delitem(sys.modules, name)
    monkeypatch.setitem(sys.modules, "matplotlib", None)  # import matplotlib → ImportError
    md = synthetic / "r.md"
    result = CliRunner().invoke(_app(), ["-w", str(synthetic), "--markdown", str(md)])
    assert result.exit_code == 0, result.output
    assert "pip install 'torch-autokernel[report]'" in result.output
    assert "matmul" in result.output and "1.404x" in result.output
    assert "[bold]num_warps" in result.output  # hypotheses are shown as written, not as markup
    assert not (synthetic / "progress.png").exists()
    assert "![progress]" not in md.read_text()


def _png_size(path: Path) -> tuple[int, int]:
    data = path.read_bytes()
    assert data[:8] == PNG_MAGIC and data[12:16] == b"IHDR"
    return struct.unpack(">II", data[16:24])


@pytest.mark.slow
@pytest.mark.parametrize("fixture", ["synthetic", "h200"])
def test_png_written(fixture, request, tmp_path):
    pytest.importorskip("matplotlib", reason="matplotlib not installed: pip install matplotlib")
    root = request.getfixturevalue(fixture)
    out = tmp_path / "plots" / "p.png"
    args = ["-w", str(root), "--png", str(out), "--json", str(tmp_path / "r.json")]
    result = CliRunner().invoke(_app(), args)
    assert result.exit_code == 0, result.output
    width, height = _png_size(out)
    n = 2 if fixture == "synthetic" else 1  # the pending softmax has no points: no panel
    assert width == 1100 and 300 * n < height < 400 * n + 200
    assert 20_000 < out.stat().st_size < 2_000_000
    assert json.loads((tmp_path / "r.json").read_text())["png"] == str(out)


def test_png_default_next_to_results_and_no_png(h200):
    pytest.importorskip("matplotlib", reason="matplotlib not installed: pip install matplotlib")
    assert CliRunner().invoke(_app(), ["-w", str(h200), "--no-png"]).exit_code == 0
    assert not (h200 / "progress.png").exists()
    assert CliRunner().invoke(_app(), ["-w", str(h200)]).exit_code == 0
    _png_size(h200 / "progress.png")


def test_starter_that_did_not_pass(tmp_path):
    _write_rows(tmp_path, [_row(0, "reduce", "reduce", "crash", "starter")])
    (t,) = rep.build(tmp_path).targets
    assert (t.failed, t.baseline_us, t.best_us, t.speedup_vs_starter) == (1, None, None, None)
    assert t.baseline_note == "the starter has no timing"
    result = CliRunner().invoke(_app(), ["-w", str(tmp_path), "--png", str(tmp_path / "p.png")])
    assert result.exit_code == 0, result.output
    assert "no proposal was kept yet" in result.output


def test_the_best_kernels_backend_is_shown_and_old_files_read_without_it(tmp_path, h200):
    rows = [
        _row(0, "rmsnorm", "rmsnorm", "keep", "starter", 20, 40, 30, "baseline"),
        {**_row(1, "rmsnorm", "rmsnorm", "keep", "llm", 10, 40, 30, "to CUDA"), "backend": "cuda"},
    ]
    ws = tmp_path / "cuda-night"
    ws.mkdir()
    _write_rows(ws, rows)
    (t,) = rep.build(ws).targets
    assert t.best_backend == "cuda"
    assert "rmsnorm [cuda]" in report_view.to_markdown(rep.build(ws))
    assert all(t.best_backend == "" for t in rep.build(h200).targets)  # no backend column
