"""Targets from flags and plan.yaml; the orchestrator's state file and status view."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from autokernel.orchestrate import next_target, status_lines
from autokernel.run.state import Score, load, new_state, save
from autokernel.targets import TargetError, from_plan, parse_shape, single

ROOT = Path(__file__).resolve().parents[1]


def test_shapes_parse_in_the_specs_dimension_order():
    assert parse_shape("softmax", "4096x50257") == {"rows": 4096, "cols": 50257}
    assert parse_shape("softmax", "2x8x128") == {"batch": 2, "rows": 8, "cols": 128}
    assert parse_shape("matmul", "M=128, N=64, K=32") == {"M": 128, "N": 64, "K": 32}


@pytest.mark.parametrize(
    "kind,text,match",
    [
        ("softmax", "4096", "give 2 numbers"),
        ("softmax", "axb", "write it as"),
        ("softmax", "rows=4,vocab=8", "no dimension vocab"),
        ("matmul", "0x4x4", "positive"),
        ("matmul", "M=128,N=64", "needs K too"),
        ("softmax", "rows=4,cols=8,causal=0", "no dimension causal"),
        ("flash_attention", "batch=1,heads=2,kv_heads=2,seq=64,head_dim=64,causal=2", "causal"),
        ("flash_attention", "batch=1,heads=2,kv_heads=2,seq=64,head_dim=64,mask=3", "mask"),
    ],
)
def test_bad_shapes_say_what_to_write(kind, text, match):
    with pytest.raises(TargetError, match=match):
        parse_shape(kind, text)


def test_a_shape_can_ask_for_full_or_masked_attention():
    """A model's attention may be bidirectional (BERT) or masked (padding): the night must time
    that case, not the causal default, so --shape names it."""
    import torch

    from autokernel.specs import SPECS

    target = single("flash_attention", ["batch=1,heads=2,kv_heads=2,seq=16,head_dim=16,causal=0"])
    (size,) = target.harness_sizes()
    assert size["causal"] == 0
    inputs = SPECS["flash_attention"].make_inputs(size, torch.float32, torch.Generator(), "cpu")
    assert inputs[3] is False
    masked = single("flash_attention", ["batch=1,heads=2,kv_heads=2,seq=16,head_dim=16,mask=1"])
    (size,) = masked.harness_sizes()
    inputs = SPECS["flash_attention"].make_inputs(size, torch.float32, torch.Generator(), "cpu")
    assert inputs[5] is not None
    with pytest.raises(TargetError, match=r"or causal=0\|1"):
        parse_shape("flash_attention", "batch=1,heads=2,kv_heads=2,seq=16,head_dim=16,window=4")


def test_unknown_kernel_type_lists_the_known_ones():
    with pytest.raises(TargetError, match="choose one of matmul"):
        single("softmaxx")


def test_plan_yaml_targets(tmp_path):
    plan = tmp_path / "plan.yaml"
    plan.write_text(
        "targets:\n"
        "  - {kernel_type: rmsnorm, shapes: ['8x4096'], dtype: bf16, share: 0.3,\n"
        "     args: {eps: 1e-6}}\n"
        "  - {kernel_type: rmsnorm, shapes: [{rows: 8, cols: 1024}], share: 0.1}\n"
        "  - {kernel_type: matmul, shapes: ['128x256x512'], share: 0.6}\n"
    )
    targets = from_plan(plan)
    assert [t.name for t in targets] == ["rmsnorm", "rmsnorm_1", "matmul"]
    assert targets[0].dtype == "bfloat16" and targets[0].shapes == ({"rows": 8, "cols": 4096},)
    state = new_state("t", "tuner", 1.0, targets)
    assert next_target(state).name == "matmul"  # the largest Amdahl gain first


@pytest.mark.parametrize(
    "text,match",
    [
        ("targets: []\n", "targets:"),
        ("targets: [{kernel_type: conv}]\n", "conv"),
        ("a: [\n", "YAML"),
    ],
)
def test_bad_plans_are_clear(tmp_path, text, match):
    plan = tmp_path / "plan.yaml"
    plan.write_text(text)
    with pytest.raises(TargetError, match=match):
        from_plan(plan)


@pytest.mark.slow
def test_state_round_trips_and_status_prints(tmp_path):
    state = new_state("night1", "tuner", 2.0, [single("softmax", ["64x1024"])])
    ts = state.targets[0]
    ts.baseline = Score(us=200.0, spread=0.01)
    ts.best = Score(us=100.0, spread=0.01, pct_peak=45.0, speedup_vs_eager=1.5)
    ts.experiments, ts.kept = 7, 2
    save(state, tmp_path)
    again = load(tmp_path)
    assert again == state
    text = "\n".join(status_lines(again))
    assert "night1" in text and "2.00" in text and "1.5" in text and "45" in text
    out = subprocess.run([sys.executable, str(ROOT / "orchestrate.py"), "status", str(tmp_path)],
                         capture_output=True, text=True)  # fmt: skip
    assert out.returncode == 0 and "softmax" in out.stdout and "100.0" in out.stdout


@pytest.mark.slow
def test_status_without_a_run_says_how_to_start(tmp_path):
    out = subprocess.run([sys.executable, str(ROOT / "orchestrate.py"), "status", str(tmp_path)],
                         capture_output=True, text=True)  # fmt: skip
    assert out.returncode == 1 and "autokernel run" in out.stderr
