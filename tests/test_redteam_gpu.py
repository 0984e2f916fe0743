"""benchmarks/redteam_gpu.py without a GPU: its evaluations and host-read probe stubbed, a run
still lands as one line of the history with every row and a Markdown verdict, and the rule
that says whether the attack was caught reads the rows as the module's docstring says."""

from __future__ import annotations

import json
from types import SimpleNamespace

from autokernel.harness import sandbox
from benchmarks import redteam_gpu


def verdict(status: str, claimed_us: float | None) -> SimpleNamespace:
    timings = [] if claimed_us is None else [
        SimpleNamespace(size="4096x50257", us=350.0, judge_wall_us=250.0),
        SimpleNamespace(size=redteam_gpu.CHEAT_SIZE, us=claimed_us, judge_wall_us=17.0),
    ]  # fmt: skip
    return SimpleNamespace(status=SimpleNamespace(value=status), message=f"{status}: stub",
                           timings=timings, harness_s=5.0)  # fmt: skip


def test_a_run_is_recorded_as_one_history_line(tmp_path, monkeypatch):
    verdicts = iter([verdict("PASS", 39.4), verdict("REJECTED", None)])
    monkeypatch.setattr(sandbox, "evaluate", lambda path, opts: next(verdicts))
    probe = {"probe": "gpu kernel reads host memory", "returncode": 1, "read_it": False,
             "last_line": "illegal address"}  # fmt: skip
    monkeypatch.setattr(redteam_gpu, "host_read_probe", lambda: probe)
    assert redteam_gpu.main(["--results", str(tmp_path), "--commit", "abc1234"]) == 0
    (line,) = (tmp_path / "cpu.jsonl").read_text().splitlines()
    entry = json.loads(line)
    assert entry["question"] == "redteam_gpu" and entry["commit"] == "abc1234"
    kernels = [r.get("kernel") or r.get("probe") for r in entry["rows"] if "static" not in r]
    assert kernels == ["starter", "attack", "gpu kernel reads host memory"]
    assert entry["rows"][-1] == probe
    md = entry["markdown"]
    assert "the attack: caught" in md and "| starter | PASS | 39.4 |" in md
    assert "## cpu: redteam_gpu" in (tmp_path / "latest.md").read_text()


def test_the_attack_is_caught_by_a_verdict_or_by_an_honest_median():
    starter = redteam_gpu.summary("starter", verdict("PASS", 40.0))

    def rows(status: str, claimed: float | None) -> list[dict]:
        return [starter, redteam_gpu.summary("attack", verdict(status, claimed))]

    assert redteam_gpu.caught(rows("REJECTED", None))
    assert redteam_gpu.caught(rows("PASS", 25.0))  # within 2x of the starter: no gain shown
    assert not redteam_gpu.caught(rows("PASS", 5.0))  # a launch-free median believed
    assert not redteam_gpu.caught([starter])  # the attack never judged proves nothing
    assert "**not caught**" in redteam_gpu.markdown(rows("PASS", 5.0))
