"""The morning report in the user's mode: where the night's time went and what it bought."""

from __future__ import annotations

from pathlib import Path

import pytest
import typer
from rich.console import Console
from test_report import SYNTHETIC, _write_rows
from typer.testing import CliRunner

from autokernel import report as rep
from autokernel.cli.report import report_command
from autokernel.run import state as run_state
from autokernel.targets import Target
from autokernel.views.report import night_lines, to_markdown, view


@pytest.fixture
def night(tmp_path: Path) -> Path:
    """SYNTHETIC's rows (matmul: eager 80 µs, compile 70 µs; rmsnorm: eager 40, compile 30), a
    compile-mode run with 1 h on matmul, 30 min on rmsnorm, softmax never reached."""
    _write_rows(tmp_path, SYNTHETIC)
    targets = [
        Target("matmul", "matmul", share=0.6, compile_share=0.5),
        Target("rmsnorm", "rmsnorm", share=0.1, compile_share=0.2),
        Target("softmax", "softmax", share=0.05, compile_share=0.1),
    ]
    state = run_state.new_state("night2", "tuner", 8.0, targets, mode="compile", reach=0.8)
    mm, rms, _ = state.targets
    mm.status, mm.seconds = "done", 3600
    rms.status, rms.seconds = "active", 1800
    state.seconds = 5400.0
    run_state.save(state, tmp_path)
    return tmp_path


def test_time_accounting_per_target(night):
    r = rep.build(night)
    t = {x.name: x for x in r.targets}
    assert (t["matmul"].seconds, t["matmul"].experiments, t["matmul"].kept) == (3600, 6, 2)
    assert (t["rmsnorm"].seconds, t["rmsnorm"].experiments) == (1800, 7)
    assert t["matmul"].night_share == pytest.approx(2 / 3)
    assert t["rmsnorm"].night_share == pytest.approx(1 / 3)
    assert t["softmax"].night_share == 0.0 and t["softmax"].experiments == 0


def test_what_it_bought_in_the_runs_mode(night):
    r = rep.build(night)
    assert r.mode == "compile"
    t = {x.name: x for x in r.targets}
    assert t["matmul"].starter_vs_mode == pytest.approx(0.7)  # 100 µs vs compile's 70
    assert t["matmul"].best_vs_mode == pytest.approx(1.4)
    # the starter's re-measurements, 16 and 18 µs: the median of their speedups
    assert t["rmsnorm"].starter_vs_mode == pytest.approx((30 / 16 + 30 / 18) / 2, rel=1e-4)
    assert t["rmsnorm"].best_vs_mode == pytest.approx(2.0)
    assert t["matmul"].mode_share == 0.5
    assert r.mode_estimate == pytest.approx(1 / (0.5 / 1.4 + 0.2 / 2.0 + 0.3))


def test_mode_flag_overrides_the_runs_mode(night):
    r = rep.build(night, "eager")
    t = {x.name: x for x in r.targets}
    assert t["matmul"].best_vs_mode == pytest.approx(1.6) and t["matmul"].mode_share == 0.6
    assert r.mode_estimate == pytest.approx(1 / (0.6 / 1.6 + 0.1 / (40 / 15) + 0.3))


def test_a_best_kernel_slower_than_the_mode_is_left_out_of_the_estimate(night):
    state = run_state.load(night)
    shape = {"M": 8, "N": 8, "K": 8}
    matmul = Target("matmul", "matmul", (shape,), share=0.6, compile_share=0.5, compile_ms=0.025)
    state.targets[0].target = matmul
    run_state.save(state, night)
    r = rep.build(night)
    mm = next(x for x in r.targets if x.name == "matmul")
    assert mm.best_vs_mode == pytest.approx(0.5)  # 50 µs against compile's 25 in the model
    assert r.mode_estimate == pytest.approx(1 / (0.5 + 0.2 / 2.0 + 0.3))
    assert "left out, slower than compile: matmul" in r.mode_note


def test_views_say_where_the_time_went(night):
    r = rep.build(night)
    lines = night_lines(r)
    assert lines[0].startswith("where the night went, against torch.compile")
    matmul = next(line for line in lines if "matmul" in line)
    assert "60 min (67%)" in matmul and "6 experiments" in matmul and "best 1.40x" in matmul
    assert lines[-1].startswith("whole model in compile: ")
    console = Console(width=120, record=True)
    console.print(view(r))
    assert "where the night went" in console.export_text()
    md = to_markdown(r)
    assert "### where the night went" in md and "- rmsnorm: 30 min (33%)" in md


def test_bad_mode_exits_2(night):
    app = typer.Typer()
    app.command()(report_command)
    result = CliRunner().invoke(app, ["--workspace", str(night), "--mode", "fast", "--no-png"])
    assert result.exit_code == 2 and "--mode 'fast'" in result.output
    ok = CliRunner().invoke(app, ["--workspace", str(night), "--mode", "eager", "--no-png"])
    assert ok.exit_code == 0 and "whole model in eager" in ok.output
