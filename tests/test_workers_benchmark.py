"""benchmarks/workers.py's arithmetic, from a run's own files: the steady rate leaves out the
starter (which pays for the baselines once per machine), losses are counted, and each run is
cut so that 1 and 2 workers of 100 s fit the 5 minutes a device call is given."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from autokernel.run.results import ResultRow, ResultsLog, RowStatus
from autokernel.run.worker_log import WorkerLog
from benchmarks import workers


def fake_run(ws: Path, stamps: list[str]) -> None:
    """A finished run: one row per stamp (run.log time of its row), 60 s of loop time."""
    log = ResultsLog(ws / "results.tsv")
    lines = []
    for n, stamp in enumerate(stamps):
        log.append(ResultRow(n, "abc", "matmul", "matmul", RowStatus.REVERT, correctness="PASS",
                             harness_s=10.0 + n))  # fmt: skip
        lines.append(f"2026-12-05 {stamp} exp {n} [matmul] revert 1.0 µs ×eager 1 — x (y)")
    scratch = ws / ".autokernel"
    scratch.mkdir(parents=True, exist_ok=True)
    (scratch / "run.log").write_text("\n".join(lines) + "\n")
    (scratch / "state.json").write_text(json.dumps({"seconds": 60.0}))
    wlog = WorkerLog(ws)
    wlog.append("w0", "started", where="pid 1 on vm GPU 0")
    wlog.append("w0", "lost", key="exp 2", experiment=2, seconds=3.0, why="exited (-9)")


def test_the_steady_rate_leaves_out_the_starter_and_losses_are_counted(tmp_path):
    fake_run(tmp_path, ["00:00:30", "00:00:40", "00:00:50", "00:01:00"])
    got = workers.measure(tmp_path)
    assert got["experiments"] == 4 and got["passed"] == 4
    assert got["per_hour"] == pytest.approx(3600 * 4 / 60)
    assert got["steady_per_hour"] == pytest.approx(3600 * 3 / 30)  # 3 rows after exp 0 in 30 s
    assert got["harness_median_s"] == pytest.approx(11.5)
    assert got["slots"][0]["lost"] == 1


def test_one_and_two_workers_of_100_s_fit_a_five_minute_call():
    bound = 2 * (100 + workers.RUN_GRACE_S)  # each run is cut at seconds + grace
    assert bound + 30 <= 300  # 30 s for the script's own start and the table
