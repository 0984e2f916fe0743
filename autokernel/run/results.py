"""results.tsv: one row per experiment, appended and fsynced, the only writer of the file.

The file is untracked, so reverts never lose rows, and it must survive a crash at any moment:
each row is one `os.write` on an O_APPEND descriptor followed by fsync, and a torn last line
left by a crash is cut off before this process appends its first row. Every field is non-empty
("-" for none) so `column -t -s$'\\t' results.tsv` keeps the columns aligned.
"""

from __future__ import annotations

import errno
import math
import os
import re
from collections.abc import Mapping
from dataclasses import dataclass, fields
from enum import Enum
from pathlib import Path

from autokernel.secrets import redact


class RowStatus(str, Enum):
    """What became of an experiment. A str, so that the TSV text and comparisons with the
    plain strings read back from the file are unchanged."""

    KEEP = "keep"
    REVERT = "revert"
    FAIL = "fail"
    CRASH = "crash"
    TIMEOUT = "timeout"
    REJECTED = "rejected"
    # the agent's reply held no usable kernel, so nothing was committed or evaluated; the row
    # still counts as an experiment (the commit column is "-").
    INVALID = "invalid"

    def __str__(self) -> str:
        return self.value


@dataclass
class ResultRow:
    """One results.tsv row as the loop writes it; the field order is the column order."""

    experiment: int
    commit: str | None
    target: str
    kernel_type: str | None
    status: RowStatus
    correctness: str | None = None
    latency_us: float | None = None
    throughput: float | None = None
    unit: str | None = None
    pct_peak: float | None = None
    speedup_vs_eager: float | None = None
    speedup_vs_compile: float | None = None
    harness_s: float | None = None
    agent: str | None = None
    tokens: int | None = None
    description: str | None = None
    # how the candidate was contained: bwrap, or none (it ran with the user's rights)
    sandbox: str | None = None
    backend: str | None = None  # the kernel's BACKEND (files from before it lack the column)

    def as_dict(self) -> dict[str, object]:
        return {f.name: getattr(self, f.name) for f in fields(self)}

    @classmethod
    def parse(cls, text: Mapping[str, str]) -> ResultRow | None:
        """The row as the file holds it (every field text, "-" for none) back in its types;
        None for a row that is no experiment (no number, no target, an unknown status).
        Columns a file from before them lacks are None."""
        try:
            experiment, status = int(text.get("experiment", "")), RowStatus(text.get("status"))
        except ValueError:
            return None
        if not text.get("target") or text["target"] == EMPTY:
            return None
        values: dict[str, object] = {}
        for name in COLUMNS[5:]:
            raw = text.get(name, EMPTY)
            values[name] = None if raw in ("", EMPTY) else _PARSE.get(name, str)(raw)
        return cls(experiment, _text(text.get("commit")), text["target"],
                   _text(text.get("kernel_type")), status, **values)  # fmt: skip


COLUMNS = tuple(f.name for f in fields(ResultRow))
STATUSES = tuple(s.value for s in RowStatus)
REQUIRED = ("experiment", "status", "target")
EMPTY = "-"
SIGNIFICANT_DIGITS = 5  # timings vary run to run by far more than 1e-5
HEADER = "\t".join(COLUMNS) + "\n"
_BREAKS = re.compile(r"[^\S ]")  # any whitespace but a plain space: tabs, newlines, \r, ...
_TAIL_CHUNK = 4096  # bytes read at a time when looking back for the last newline


def _text(raw: str | None) -> str | None:
    return None if raw in (None, "", EMPTY) else raw


def _float(raw: str) -> float | None:
    try:
        value = float(raw)
    except ValueError:
        return None
    return value if value == value else None  # nan: no figure


def _int(raw: str) -> int | None:
    value = _float(raw)
    return None if value is None else int(value)


# How each typed column reads back; the others are text.
_PARSE = {
    "latency_us": _float, "throughput": _float, "pct_peak": _float, "speedup_vs_eager": _float,
    "speedup_vs_compile": _float, "harness_s": _float, "tokens": _int,
}  # fmt: skip


def _format_float(value: float) -> str:
    """Five significant digits, but whole numbers past that in full rather than as 1.2346e+05."""
    if not math.isfinite(value):
        return str(value)  # nan, inf, -inf
    if abs(value) >= 10**SIGNIFICANT_DIGITS:
        return str(round(value))
    return f"{value:.{SIGNIFICANT_DIGITS}g}"


def format_value(value: object) -> str:
    """One field: None → "-", floats rounded, no tabs or newlines, never empty."""
    if value is None:
        return EMPTY
    value = getattr(value, "value", value)  # an Enum member stands for its value
    if isinstance(value, float):
        text = _format_float(value)
    else:
        text = str(value)
    text = _BREAKS.sub(" ", text).strip()
    return text or EMPTY


def format_row(row: ResultRow | Mapping[str, object]) -> str:
    """Validate a row and render it as one tab-separated line ending in a newline."""
    if isinstance(row, ResultRow):
        row = row.as_dict()
    unknown = sorted(set(row) - set(COLUMNS))
    if unknown:
        raise ValueError(f"unknown results column(s): {', '.join(unknown)}")
    missing = [key for key in REQUIRED if row.get(key) is None]
    if missing:
        raise ValueError(f"missing required results column(s): {', '.join(missing)}")
    experiment = row["experiment"]
    if isinstance(experiment, bool) or not isinstance(experiment, int) or experiment < 0:
        raise ValueError(f"experiment must be a non-negative int, got {experiment!r}")
    status = format_value(row["status"])
    if status not in STATUSES:
        raise ValueError(f"status must be one of {', '.join(STATUSES)}; got {status!r}")
    fields = [format_value(row.get(key)) for key in COLUMNS]
    fields[COLUMNS.index("status")] = status
    return redact("\t".join(fields) + "\n")  # descriptions may quote a candidate's output


def _repair_tail(path: Path) -> None:
    """Cut a torn last line (no final newline: a crash mid-write) back to the last newline."""
    try:
        fd = os.open(path, os.O_RDWR)
    except FileNotFoundError:
        return
    try:
        size = os.fstat(fd).st_size
        if size == 0 or os.pread(fd, 1, size - 1) == b"\n":
            return
        end = size
        keep = 0  # no newline at all: even the header was torn, so start the file over
        while end > 0:
            start = max(0, end - _TAIL_CHUNK)
            chunk = os.pread(fd, end - start, start)
            cut = chunk.rfind(b"\n")
            if cut >= 0:
                keep = start + cut + 1
                break
            end = start
        os.ftruncate(fd, keep)
        os.fsync(fd)
    finally:
        os.close(fd)


def _fit_header(path: Path, line: str) -> str:
    """The line cut to the columns of an existing file's header: a file begun before a column
    was added keeps its width, else read() would skip every new row as malformed."""
    try:
        with path.open("rb") as f:
            first = f.readline().decode("utf-8", "replace")
    except FileNotFoundError:
        return line
    header = first.rstrip("\n").split("\t")
    if (
        not first.endswith("\n")
        or len(header) >= len(COLUMNS)
        or header != list(COLUMNS[: len(header)])
    ):
        return line
    return "\t".join(line.rstrip("\n").split("\t")[: len(header)]) + "\n"


class ResultsLog:
    """Appends and reads results.tsv; one instance per process is the file's only writer."""

    def __init__(self, path: Path) -> None:
        self.path = Path(path)
        self._tail_checked = False

    def append(self, row: ResultRow | Mapping[str, object]) -> None:
        """Append one row durably; ValueError for a bad row, OSError (disk full...) unchanged.

        After a failed write the tail is checked again, so the caller may simply retry.
        """
        line = format_row(row)
        if not self._tail_checked:
            _repair_tail(self.path)
            self._tail_checked = True
        line = _fit_header(self.path, line)
        try:
            fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
            try:
                data = ((HEADER if os.fstat(fd).st_size == 0 else "") + line).encode("utf-8")
                written = os.write(fd, data)
                if written != len(data):
                    raise OSError(errno.ENOSPC, f"short write to {self.path}")
                os.fsync(fd)
            finally:
                os.close(fd)
        except OSError:
            self._tail_checked = False  # a partial line may be on disk: cut it before a retry
            raise

    def read(self) -> list[dict[str, str]]:
        """All complete rows, oldest first; [] when the file does not exist yet.

        The header line names the fields (a header naming fields we never write was damaged:
        today's columns are assumed); a torn last line and lines with the wrong number of
        fields are skipped.
        """
        try:
            text = self.path.read_bytes().decode("utf-8", "replace")
        except FileNotFoundError:
            return []
        lines = text.split("\n")
        lines.pop()  # after the last newline: "" or a torn line
        if not lines:
            return []
        header = lines[0].split("\t")
        if not set(header) <= set(COLUMNS):
            header = list(COLUMNS)  # a damaged header: rows of today's width are still read
        rows = []
        for line in lines[1:]:
            fields = line.split("\t")
            if len(fields) == len(header) and fields != header:
                rows.append(dict(zip(header, fields, strict=True)))
        return rows

    def rows(self) -> list[ResultRow]:
        """The experiments' rows in their types, oldest first (rows that are no experiment, as
        ResultRow.parse says, are left out)."""
        return [row for text in self.read() if (row := ResultRow.parse(text)) is not None]

    def experiments(self) -> set[int]:
        """Experiment numbers recorded so far."""
        numbers = set()
        for row in self.read():
            try:
                numbers.add(int(row.get("experiment", "")))
            except ValueError:
                continue
        return numbers

    def last_experiment(self) -> int | None:
        """Highest experiment number recorded, or None for an empty log."""
        return max(self.experiments(), default=None)
