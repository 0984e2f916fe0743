"""benchmarks.runner: every run becomes one history line per GPU, and latest.md shows the newest
run of each question on each GPU."""

from __future__ import annotations

import json

from benchmarks import runner


def test_record_appends_history_and_latest_keeps_the_newest(tmp_path, monkeypatch):
    dates = iter(["2026-12-03T01:00:00Z", "2026-12-04T01:00:00Z", "2026-12-02T01:00:00Z",
                  "2026-12-01T01:00:00Z"])  # fmt: skip
    env = runner.environment

    def fake_environment(commit=None):
        return env(commit) | {"date": next(dates), "gpu": "NVIDIA H200"}

    monkeypatch.setattr(runner, "environment", fake_environment)
    for commit, text in (("aaa", "old run"), ("bbb", "new run"), ("ccc", "older still")):
        path = runner.record("q1", [{"x": 1}], text, commit=commit, results=tmp_path)
    runner.record("q2", [], "other question", commit="ddd", results=tmp_path)
    assert path == tmp_path / "h200.jsonl"
    lines = [json.loads(line) for line in path.read_text().splitlines()]
    assert [e["commit"] for e in lines] == ["aaa", "bbb", "ccc", "ddd"]
    assert lines[0]["rows"] == [{"x": 1}] and lines[0]["question"] == "q1"
    latest = (tmp_path / "latest.md").read_text()
    assert "new run" in latest and "old run" not in latest and "older still" not in latest
    assert "## NVIDIA H200: q1" in latest and "other question" in latest and "commit bbb" in latest


def test_no_folder_records_nothing(tmp_path):
    assert runner.record("q", [], "text", commit="x", results=None) is None
    assert list(tmp_path.iterdir()) == []


def test_gpu_names_become_file_names():
    assert runner.slug("NVIDIA H200") == "h200"
    assert runner.slug("NVIDIA GeForce RTX 4090") == "rtx-4090"
    assert runner.slug("AMD Instinct MI300X") == "mi300x"
    assert runner.slug("cpu") == "cpu"


def test_table_lists_every_key_once():
    text = runner.table([{"a": 1, "b": None}, {"a": 2, "c": "z"}])
    assert text.splitlines() == ["| a | b | c |", "|---|---|---|", "| 1 | - | - |", "| 2 | - | z |"]


def test_converted_history_is_not_shown_as_latest(tmp_path):
    line = {"question": "q", "date": "2026-12-03T00:00:00Z", "gpu": "NVIDIA H200", "torch": "t",
            "triton": "t", "python": None, "commit": "c", "command": "x", "rows": [],
            "markdown": "from an old file", "converted_from": "old.md"}  # fmt: skip
    (tmp_path / "h200.jsonl").write_text(json.dumps(line) + "\n")
    assert "from an old file" not in runner.write_latest(tmp_path).read_text()


def test_foreign_and_damaged_lines_are_skipped_not_fatal(tmp_path):
    good = {"question": "q", "date": "2026-12-03T00:00:00Z", "gpu": "NVIDIA H200", "torch": "t",
            "triton": "t", "python": None, "commit": "c", "command": "x", "rows": [],
            "markdown": "the real run"}  # fmt: skip
    (tmp_path / "h200.jsonl").write_text(json.dumps(good) + "\n" + '{"question": "q", "da')
    (tmp_path / "night-log.jsonl").write_text('{"experiment": 3, "status": "keep"}\n[1, 2]\n')
    assert runner.history(tmp_path) == [good]
    assert "the real run" in runner.write_latest(tmp_path).read_text()


# Scripts with a main that record nothing, and why: each must still hold (the list only shrinks).
NOT_A_QUESTION = {
    "harness_diag": "prints diagnostics (cProfile stacks, stamps) for a person to read",
    "switch_agent": "a command agent that `autokernel run` starts, not a measurement",
}
KNOWN_UNRECORDED: dict[str, str] = {}


def test_every_benchmark_script_records_through_the_runner():
    scripts = {p.stem: p.read_text() for p in (runner.ROOT / "benchmarks").glob("*.py")}
    mains = {name for name, text in scripts.items() if "\ndef main(" in text}
    unrecorded = {name for name in mains if "runner.record(" not in scripts[name]}
    assert unrecorded <= set(NOT_A_QUESTION) | set(KNOWN_UNRECORDED), unrecorded
    assert set(KNOWN_UNRECORDED) <= unrecorded, "now recorded: take it off KNOWN_UNRECORDED"
