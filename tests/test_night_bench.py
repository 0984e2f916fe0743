"""benchmarks/night.py's own logic (the night itself runs the real CLI: on the GPU, or with
--tiny on a CPU with transformers; too slow for the suite)."""

from __future__ import annotations

import yaml

from benchmarks import night

PLAN = {"model": "m", "targets": [
    {"name": "rmsnorm", "kernel_type": "rmsnorm"},
    {"name": "rotary_embedding", "kernel_type": "rotary_embedding"},
    {"name": "NewGELUActivation", "kernel_type": "generic"},
]}  # fmt: skip


def test_only_the_kinds_asked_for_stay_in_the_plan(tmp_path):
    plan = tmp_path / "plan.yaml"
    plan.write_text(yaml.safe_dump(PLAN))
    kept = night.trim_plan(plan, {"generic", "rotary_embedding"})
    assert kept == ["rotary_embedding", "NewGELUActivation"]
    assert [t["name"] for t in yaml.safe_load(plan.read_text())["targets"]] == kept


def test_the_report_says_what_was_planned_and_plugged_in():
    env = {"gpu": "G", "torch": "t", "triton": "x", "commit": "c", "date": "d", "command": "cmd"}
    row = {"model": "gpt2", "input": "4x1024", "planned": {"layernorm": "layernorm",
           "NewGELUActivation": "generic"}, "night_targets": ["NewGELUActivation"],
           "experiments": 3, "plugged_in": ["NewGELUActivation"], "outputs_match": True,
           "kept": {"eager": []}, "best_mode": "compile", "modes": {"eager": 2.0, "patched": 2.1},
           "predictions": [], "log": ["$ autokernel run"]}  # fmt: skip
    text = night.markdown([row], env)
    assert "generic targets planned: NewGELUActivation" in text
    assert "plugged in by verify (kernel calls > 0): NewGELUActivation" in text
    assert "eager 2.000, patched 2.100" in text
    failed = night.markdown([{"model": "llama", "input": "1x8", "failed": "run"}], env)
    assert "failed at: run" in failed


def test_a_forward_is_called_host_bound_when_its_wall_time_is_its_host_time():
    from benchmarks import forward_time

    rows = [{"variant": "eager", "wall_ms": 7.5, "host_ms": 7.2, "gpu_ms": 6.1},
            {"variant": "compile", "wall_ms": 1.9, "host_ms": 0.3, "gpu_ms": 1.8}]  # fmt: skip
    text = forward_time.markdown("gpt2", rows)
    assert "| eager | 7.500 | 7.200 | 6.100 | host |" in text
    assert "| compile | 1.900 | 0.300 | 1.800 | GPU |" in text
