"""benchmarks/cuda_night.py reads a night's and a switch run's results.tsv into the record:
which backend each experiment was judged on and whether the run switched between them."""

from __future__ import annotations

from pathlib import Path

from benchmarks import cuda_night

HEADER = ("experiment\tcommit\ttarget\tkernel_type\tstatus\tcorrectness\tlatency_us\tthroughput\t"
          "unit\tpct_peak\tspeedup_vs_eager\tspeedup_vs_compile\tharness_s\tagent\ttokens\t"
          "description\tsandbox\tbackend")  # fmt: skip


def _workspace(tmp_path: Path, rows: list[tuple[str, str, str, str]]) -> Path:
    """rows: (status, correctness, latency_us, backend)."""
    lines = [HEADER]
    for i, (status, ok, us, backend) in enumerate(rows):
        lines.append(f"{i}\tc{i}\trmsnorm\trmsnorm\t{status}\t{ok}\t{us}\t1\tGB/s\t50\t1\t-\t"
                     f"3.0\tcommand\t0\texp {i}\tbwrap\t{backend}")  # fmt: skip
    (tmp_path / "results.tsv").write_text("\n".join(lines) + "\n")
    return tmp_path


def test_the_switch_record_names_both_backends_and_counts_the_switches(tmp_path):
    ws = _workspace(tmp_path, [("keep", "PASS", "10", "triton"), ("keep", "PASS", "8", "cuda"),
                               ("revert", "PASS", "9", "triton")])  # fmt: skip
    text = "\n".join(cuda_night.switch_markdown(cuda_night.experiments(ws)))
    assert "backends judged: cuda, triton; switches between consecutive experiments: 2" in text


def test_a_run_that_never_left_its_backend_shows_no_switch(tmp_path):
    ws = _workspace(tmp_path, [("keep", "PASS", "10", "triton"), ("crash", "FAIL", "", "triton")])
    rows = cuda_night.experiments(ws)
    assert "judged: triton; switches between consecutive experiments: 0" in "\n".join(
        cuda_night.switch_markdown(rows)
    )
    # A failed experiment has no timing and no JSON row; the timed one keeps its backend.
    assert [(r["backend"], r["us"]) for r in cuda_night.json_rows(rows, "switch", {})] == [
        ("triton", 10.0)
    ]


def test_a_workspace_without_results_records_that_nothing_ran(tmp_path):
    assert cuda_night.experiments(tmp_path) == []
    assert "no experiment was recorded" in cuda_night.switch_markdown([])
