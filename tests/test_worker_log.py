"""The per-worker summary the report shows: a slot busy the whole time is 100 % busy, never
more, though its first job began before any line was written."""

from __future__ import annotations

import pytest

from autokernel.run.worker_log import summarize


def test_a_job_that_began_before_the_first_line_counts_from_its_start():
    records = [  # w0's job was handed over at t=100, while the worker still imported torch
        {"t": 103.0, "slot": "w0", "event": "started", "where": "pid 1 on vm CPU"},
        {"t": 110.0, "slot": "w0", "event": "done", "key": "evaluate", "seconds": 10.0},
        {"t": 130.0, "slot": "w0", "event": "done", "key": "exp 1", "experiment": 1,
         "seconds": 20.0},
        {"t": 125.0, "slot": "w1", "event": "lost", "key": "exp 2", "experiment": 2,
         "seconds": 15.0, "why": "exited (-9)"},
    ]  # fmt: skip
    slots, span = summarize(records)
    assert span == pytest.approx(30.0)  # from t=100, not from the first line at 103
    w0 = next(s for s in slots if s.slot == "w0")
    assert w0.busy_s / span == pytest.approx(1.0)
    assert (w0.evaluations, w0.other_jobs, w0.where) == (1, 1, "pid 1 on vm CPU")
    assert next(s for s in slots if s.slot == "w1").lost == 1
