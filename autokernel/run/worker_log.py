"""What each parallel slot did: .autokernel/workers.jsonl, one JSON line per event, appended by
the driver alone (the one writer), and the per-slot summary the report shows.

results.tsv stays one row per experiment with its fixed columns; which slot evaluated what,
how long it was busy, what was lost and how each slot timed the best kernel belong to the
run's machinery, so they live here. Events: started (where: pid, host, GPU), done
(experiment, seconds), lost (why), calibrated (microseconds of the best kernel), slow or
broken (the slot check of parallel_keep.py).
"""

from __future__ import annotations

import json
import os
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from autokernel.run import layout

LOG_FILE = layout.WORKERS_LOG


class WorkerLog:
    def __init__(self, root: Path) -> None:
        self.path = Path(root) / LOG_FILE

    def append(self, slot: str, event: str, **fields: Any) -> None:
        """One line per event; a full disk loses the line, never the run (rows are what count)."""
        line = json.dumps({"t": round(time.time(), 3), "slot": slot, "event": event, **fields})
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
            try:
                os.write(fd, (line + "\n").encode())
            finally:
                os.close(fd)
        except OSError:
            pass

    def read(self) -> list[dict[str, Any]]:
        """Every complete line, oldest first; [] without a log (a run on one GPU)."""
        try:
            text = self.path.read_text(errors="replace")
        except OSError:
            return []
        out = []
        for line in text.splitlines():
            try:
                record = json.loads(line)
            except ValueError:
                continue  # a torn last line after a crash
            if isinstance(record, dict) and "slot" in record:
                out.append(record)
        return out


@dataclass
class SlotSummary:
    slot: str
    where: str = ""
    evaluations: int = 0  # experiments it evaluated (results may be re-runs after a loss)
    other_jobs: int = 0  # calibrations, interleaved comparisons, starters
    lost: int = 0
    busy_s: float = 0.0
    status: str = "ok"  # ok, slow or broken at its last check
    note: str = ""

    def per_hour(self, span_s: float) -> float | None:
        return 3600.0 * self.evaluations / span_s if span_s > 0 else None


def summarize(records: list[dict[str, Any]]) -> tuple[list[SlotSummary], float]:
    """Per slot, in name order, and the span in seconds from the first job's start (or event)
    to the last event."""
    slots: dict[str, SlotSummary] = {}
    for r in records:
        s = slots.setdefault(str(r["slot"]), SlotSummary(str(r["slot"])))
        event = r.get("event")
        if event == "started":
            s.where = str(r.get("where", ""))
        elif event == "done":
            s.busy_s += float(r.get("seconds") or 0.0)
            if r.get("experiment") is not None:
                s.evaluations += 1
            else:
                s.other_jobs += 1
        elif event == "lost":
            s.lost += 1
            s.busy_s += float(r.get("seconds") or 0.0)
        elif event in ("ok", "slow", "broken"):
            s.status, s.note = str(event), str(r.get("note", ""))
    times = [float(r["t"]) for r in records if isinstance(r.get("t"), int | float)]
    # A job's line is written when it ends: it began `seconds` earlier, often before the slot's
    # "started" line (the first job is handed over while the worker still imports torch).
    times += [
        float(r["t"]) - float(r.get("seconds") or 0.0)
        for r in records
        if r.get("event") in ("done", "lost") and isinstance(r.get("t"), int | float)
    ]
    span = max(times) - min(times) if times else 0.0
    return sorted(slots.values(), key=lambda s: (len(s.slot), s.slot)), span
