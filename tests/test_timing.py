"""Host time per call: what the benchmark puts beside a row to show a host-bound kernel."""

from __future__ import annotations

import time

from autokernel.timing import host_per_call_us


def test_host_time_per_call_counts_the_callers_own_time():
    calls: list[float] = []

    def two_ms() -> None:
        calls.append(time.perf_counter())
        time.sleep(0.002)

    host = host_per_call_us(two_ms, on_gpu=False, calls=5)
    assert len(calls) == 5
    assert 2000.0 <= host < 50_000.0
