"""results.tsv: header once, one durable line per row, torn tails repaired, fields never empty."""

from __future__ import annotations

import errno
import os

import pytest

from autokernel.run import results
from autokernel.run.results import COLUMNS, STATUSES, ResultRow, ResultsLog, RowStatus


def row(n: int, **extra: object) -> dict[str, object]:
    base: dict[str, object] = {
        "experiment": n,
        "commit": "abc1234",
        "target": "softmax_4096",
        "kernel_type": "softmax",
        "status": "keep",
        "correctness": "PASS",
        "latency_us": 12.3456789,
        "throughput": 2345.678,
        "unit": "GB/s",
        "pct_peak": 55.2,
        "speedup_vs_eager": 1.5,
        "speedup_vs_compile": None,
        "harness_s": 41.0,
        "agent": "tuner",
        "tokens": 0,
        "description": "wider blocks",
    }
    base.update(extra)
    return base


def lines(path) -> list[str]:
    text = path.read_text()
    assert text.endswith("\n")
    return text.split("\n")[:-1]


def test_columns_and_statuses_are_the_contract():
    assert COLUMNS[:5] == ("experiment", "commit", "target", "kernel_type", "status")
    assert COLUMNS[-3:] == ("description", "sandbox", "backend")
    assert len(COLUMNS) == len(set(COLUMNS)) == 18
    assert STATUSES == ("keep", "revert", "fail", "crash", "timeout", "rejected", "invalid")


def test_a_typed_row_writes_the_same_line_as_its_dict(tmp_path):
    typed = ResultRow(3, "abc123", "softmax", "softmax", RowStatus.KEEP, latency_us=1.5,
                      description="wider tiles")  # fmt: skip
    assert tuple(typed.as_dict()) == COLUMNS
    one, two = ResultsLog(tmp_path / "a.tsv"), ResultsLog(tmp_path / "b.tsv")
    one.append(typed)
    two.append({**typed.as_dict(), "status": "keep"})
    assert lines(tmp_path / "a.tsv") == lines(tmp_path / "b.tsv")
    assert one.read()[0]["status"] == RowStatus.KEEP == "keep"


def test_rows_read_back_in_their_types(tmp_path):
    log = ResultsLog(tmp_path / "r.tsv")
    written = ResultRow(7, "abc1234", "softmax", "softmax", RowStatus.REVERT, "PASS", 12.5,
                        2345.5, "GB/s", 55.25, 1.5, None, 41.0, "tuner", 120, "wider blocks",
                        "bwrap", "triton")  # fmt: skip
    log.append(written)
    log.append(ResultRow(8, None, "softmax", None, RowStatus.INVALID, agent="openai:m"))
    first, second = log.rows()
    assert first == written and isinstance(first.tokens, int)
    assert second.commit is None and second.latency_us is None and second.tokens is None


def test_rows_that_are_no_experiment_are_left_out(tmp_path):
    path = tmp_path / "r.tsv"
    ResultsLog(path).append(row(1))
    with path.open("a") as f:
        f.write("\t".join(["x", *["-"] * (len(COLUMNS) - 1)]) + "\n")  # no number
        f.write("\t".join(["2", "-", "softmax", "-", "weird", *["-"] * 13]) + "\n")
    assert [r.experiment for r in ResultsLog(path).rows()] == [1]
    assert len(ResultsLog(path).read()) == 3


def test_header_once_across_appends_and_reopened_logs(tmp_path):
    path = tmp_path / "results.tsv"
    log = ResultsLog(path)
    log.append(row(0))
    log.append(row(1, status="revert"))
    ResultsLog(path).append(row(2, status="crash", latency_us=None))
    got = lines(path)
    assert got[0] == "\t".join(COLUMNS)
    assert sum(line == got[0] for line in got) == 1
    assert len(got) == 4
    assert all(len(line.split("\t")) == len(COLUMNS) for line in got)
    assert [r["status"] for r in log.read()] == ["keep", "revert", "crash"]
    assert log.last_experiment() == 2 and log.experiments() == {0, 1, 2}


def test_header_written_into_an_existing_empty_file(tmp_path):
    path = tmp_path / "results.tsv"
    path.write_text("")
    ResultsLog(path).append(row(0))
    assert lines(path)[0] == "\t".join(COLUMNS)


def test_values_are_formatted_and_never_empty(tmp_path):
    log = ResultsLog(tmp_path / "results.tsv")
    log.append(row(3, description="", agent=None, harness_s=123456.7, pct_peak=float("nan")))
    (got,) = log.read()
    assert got["latency_us"] == "12.346"
    assert got["throughput"] == "2345.7"
    assert got["harness_s"] == "123457"
    assert got["pct_peak"] == "nan"
    assert got["speedup_vs_compile"] == "-"
    assert got["description"] == "-" and got["agent"] == "-"
    assert got["tokens"] == "0" and got["experiment"] == "3"
    assert all(value != "" for value in got.values())


def test_tabs_and_newlines_inside_values_become_spaces(tmp_path):
    path = tmp_path / "results.tsv"
    log = ResultsLog(path)
    log.append(row(0, description="split\tthe rows\nand\r\nlines", agent="llm\n"))
    got = lines(path)
    assert len(got) == 2
    assert len(got[1].split("\t")) == len(COLUMNS)
    (parsed,) = log.read()
    assert parsed["description"] == "split the rows and  lines"
    assert parsed["agent"] == "llm"


@pytest.mark.parametrize(
    "bad",
    [
        {"status": "kept"},
        {"status": None},
        {"bogus_column": 1},
        {"experiment": "7"},
        {"experiment": True},
        {"target": None},
    ],
)
def test_bad_rows_raise_and_write_nothing(tmp_path, bad):
    path = tmp_path / "results.tsv"
    with pytest.raises(ValueError):
        ResultsLog(path).append(row(0, **bad))
    assert not path.exists()


def test_missing_required_key_raises(tmp_path):
    data = row(0)
    del data["target"]
    with pytest.raises(ValueError, match="target"):
        ResultsLog(tmp_path / "results.tsv").append(data)


def test_only_required_keys_fill_the_rest_with_dashes(tmp_path):
    log = ResultsLog(tmp_path / "results.tsv")
    log.append({"experiment": 5, "status": "timeout", "target": "t"})
    (got,) = log.read()
    assert got["status"] == "timeout"
    assert [got[c] for c in COLUMNS if c not in ("experiment", "status", "target")] == ["-"] * 15


def test_torn_tail_is_skipped_by_read_and_cut_by_the_next_append(tmp_path):
    path = tmp_path / "results.tsv"
    ResultsLog(path).append(row(0))
    ResultsLog(path).append(row(1))
    with path.open("a") as f:
        f.write("2\tdeadbee\tsoftm")  # a crash mid-write
    log = ResultsLog(path)
    assert [r["experiment"] for r in log.read()] == ["0", "1"]
    assert log.last_experiment() == 1
    log.append(row(2, status="fail"))
    got = lines(path)
    assert len(got) == 4
    assert all(len(line.split("\t")) == len(COLUMNS) for line in got)
    assert [r["status"] for r in log.read()] == ["keep", "keep", "fail"]


def test_torn_header_starts_the_file_over(tmp_path):
    path = tmp_path / "results.tsv"
    path.write_text("experiment\tcom")
    log = ResultsLog(path)
    assert log.read() == [] and log.last_experiment() is None
    log.append(row(0))
    got = lines(path)
    assert got[0] == "\t".join(COLUMNS) and len(got) == 2


def test_missing_file_reads_empty(tmp_path):
    log = ResultsLog(tmp_path / "results.tsv")
    assert log.read() == [] and log.experiments() == set() and log.last_experiment() is None


def test_each_append_is_one_write_then_fsync(tmp_path, monkeypatch):
    calls: list[str] = []
    real_write, real_fsync = os.write, os.fsync

    def write(fd, data):
        calls.append("write")
        return real_write(fd, data)

    def fsync(fd):
        calls.append("fsync")
        return real_fsync(fd)

    monkeypatch.setattr(results.os, "write", write)
    monkeypatch.setattr(results.os, "fsync", fsync)
    log = ResultsLog(tmp_path / "results.tsv")
    log.append(row(0))
    log.append(row(1))
    assert calls == ["write", "fsync", "write", "fsync"]
    assert len(lines(tmp_path / "results.tsv")) == 3


def test_failed_write_propagates_and_a_retry_repairs_the_tail(tmp_path, monkeypatch):
    path = tmp_path / "results.tsv"
    log = ResultsLog(path)
    log.append(row(0))
    real_write = os.write

    def short_write(fd, data):
        return real_write(fd, data[:10])  # the disk filled up part-way through the line

    monkeypatch.setattr(results.os, "write", short_write)
    with pytest.raises(OSError) as info:
        log.append(row(1))
    assert info.value.errno == errno.ENOSPC
    monkeypatch.setattr(results.os, "write", real_write)
    log.append(row(1))
    got = lines(path)
    assert len(got) == 3
    assert all(len(line.split("\t")) == len(COLUMNS) for line in got)
    assert log.experiments() == {0, 1}


def test_oserror_from_the_filesystem_is_not_wrapped(tmp_path):
    log = ResultsLog(tmp_path / "no-such-dir" / "results.tsv")
    with pytest.raises(FileNotFoundError):
        log.append(row(0))


@pytest.mark.parametrize("dropped", [1, 2], ids=["before backend", "before sandbox"])
def test_a_log_begun_with_fewer_columns_keeps_its_width(tmp_path, dropped):
    # A workspace's results.tsv from before the backend (or sandbox) column: resumed, its new
    # rows must still be read (a row wider than the header would be skipped as malformed).
    path = tmp_path / "results.tsv"
    old = COLUMNS[:-dropped]
    path.write_text("\t".join(old) + "\n" + "\t".join(["0", *["-"] * (len(old) - 1)]) + "\n")
    log = ResultsLog(path)
    log.append(row(1, sandbox="bwrap", backend="cuda"))
    assert [r["experiment"] for r in log.read()] == ["0", "1"]
    assert all(len(line.split("\t")) == len(old) for line in lines(path))


def test_the_backend_column_is_written_and_read(tmp_path):
    log = ResultsLog(tmp_path / "results.tsv")
    log.append(row(0, backend="cuda"))
    log.append(row(1))
    assert [r["backend"] for r in log.read()] == ["cuda", "-"]


def test_a_damaged_header_still_reads_the_rows(tmp_path):
    """A header naming fields we never write (a stray edit, a damaged disk) would hide every row
    from report and resume; rows of today's width are read with today's columns."""
    path = tmp_path / "r.tsv"
    log = ResultsLog(path)
    for n in range(3):
        log.append(row(n))
    text = path.read_text().split("\n", 1)[1]
    path.write_text("experiment\tcommit\tGARBAGE\n" + text)
    assert [r["experiment"] for r in ResultsLog(path).read()] == ["0", "1", "2"]
    assert ResultsLog(path).experiments() == {0, 1, 2}
