"""The night's order: expected gain in the model against the user's baseline mode, and a starter
far below that baseline waiting until the targets within reach had their turn."""

from __future__ import annotations

import json

import pytest

from autokernel.orchestrate import REACH, Rules, move_on_reason, next_target, reopen
from autokernel.run.state import Score, State, load, new_state, save
from autokernel.targets import Target


def _target(name, kind, share, compile_share=None, ms=1.0, compile_ms=None):
    shape = (
        {"M": 4096, "hidden": 1024, "inter": 2816}
        if kind == "fused_mlp"
        else {"rows": 4096, "cols": 1024}
    )
    return Target(name, kind, (shape,), share=share, model_ms=ms, compile_ms=compile_ms,
                  compile_share=compile_share)  # fmt: skip


def _llama(mode: str) -> State:
    """fused_mlp holds the most eager time; Inductor fuses it well, so in compile mode the
    norm holds more of what is left."""
    return new_state("t", "tuner", 1.0, [
        _target("fused_mlp", "fused_mlp", 0.5, compile_share=0.2, ms=2.0, compile_ms=1.0),
        _target("rmsnorm", "rmsnorm", 0.3, compile_share=0.4, ms=1.2, compile_ms=0.6),
    ], mode=mode, reach=REACH)  # fmt: skip


def test_mode_changes_the_order():
    assert next_target(_llama("eager")).name == "fused_mlp"
    assert next_target(_llama("compile")).name == "rmsnorm"


def test_old_plans_without_compile_figures_rank_by_the_eager_share_in_compile_mode():
    targets = [_target("a", "softmax", 0.2), _target("b", "rmsnorm", 0.6)]
    state = new_state("t", "tuner", 1.0, targets, mode="compile")
    assert next_target(state).name == "b"
    assert state.targets[1].gain("compile") == pytest.approx(0.6)


def test_gain_is_share_times_what_the_roofline_leaves_over_the_modes_time():
    ts = _llama("eager").targets[1]  # rmsnorm: 1.2 ms eager, 0.6 ms compiled, one call
    assert ts.gain("eager") == pytest.approx(0.3)  # unmeasured: all of the share
    ts.best = Score(us=600.0, spread=0.01, pct_peak=50.0, speedup_vs_eager=9.0)
    # 2x the eager time at the model's shape, at 50 % of peak: 4x reachable, 3/4 of it saved
    assert ts.gain("eager") == pytest.approx(0.3 * 0.75)
    # even with compile's time, at 50 %: 2x reachable, half of the compile share
    assert ts.gain("compile") == pytest.approx(0.4 * 0.5)
    ts.best = Score(us=600.0, spread=0.01, pct_peak=50.0)  # no model time, no baseline ratio
    ts.target = Target("x", "rmsnorm", ({"rows": 1, "cols": 1},), share=0.3)
    assert ts.gain("eager") == pytest.approx(0.3 * 0.5)  # as before modes: headroom only


def _measure_starter(state: State, name: str, us: float) -> None:
    ts = state.target(name)
    ts.status = "active"
    ts.baseline = ts.best = Score(us=us, spread=0.01, pct_peak=30.0, speedup_vs_eager=1.0,
                                  speedup_vs_compile=1.0)  # fmt: skip
    ts.experiments = 1


def _finish(ts, reason_final) -> None:
    ts.status, (ts.reason, ts.final) = "done", reason_final


def test_a_starter_far_below_the_baseline_waits_for_the_targets_within_reach():
    state = _llama("eager")
    rules = Rules(reach=REACH, mode="eager")
    mlp = next_target(state)
    assert mlp.name == "fused_mlp"
    _measure_starter(state, "fused_mlp", us=2000.0 / 0.6)  # 0.6x the model's 2 ms
    why = move_on_reason(mlp, rules)
    assert why is not None and not why[1] and "0.60x eager" in why[0] and "waits" in why[0]
    _finish(mlp, why)
    norm = next_target(state)
    assert norm.name == "rmsnorm"
    _measure_starter(state, "rmsnorm", us=1200.0 / 1.5)  # 1.5x: within reach, worked on
    assert move_on_reason(norm, rules) is None
    norm.consecutive_reverts = rules.max_reverts
    _finish(norm, move_on_reason(norm, rules))
    back = reopen(state)
    assert {t.name for t in back} == {"fused_mlp", "rmsnorm"}
    # round 2: the far target still comes after the one within reach, despite its larger gain
    assert mlp.gain("eager") > norm.gain("eager")
    assert next_target(state).name == "rmsnorm"
    norm.status = "done"
    assert next_target(state).name == "fused_mlp"  # its turn comes, and it is worked on now
    assert move_on_reason(mlp, rules) is None


def test_the_reach_rule_reads_the_runs_mode():
    state = _llama("compile")
    _measure_starter(state, "fused_mlp", us=1000.0 / 0.7)  # 0.7x compiled 1 ms, 1.4x eager 2 ms
    mlp = state.target("fused_mlp")
    assert move_on_reason(mlp, Rules(reach=REACH, mode="compile")) is not None
    assert move_on_reason(mlp, Rules(reach=REACH, mode="eager")) is None
    assert move_on_reason(mlp, Rules(reach=0.0, mode="compile")) is None  # off: CPU runs


def test_state_keeps_the_mode_and_old_state_files_load_as_eager(tmp_path):
    state = _llama("compile")
    save(state, tmp_path)
    again = load(tmp_path)
    assert again == state and again.mode == "compile" and again.reach == REACH
    path = tmp_path / ".autokernel" / "state.json"
    data = json.loads(path.read_text())
    for key in ("mode", "reach"):
        del data[key]
    for raw in data["targets"]:
        for key in ("compile_ms", "compile_share"):
            del raw["target"][key]
    path.write_text(json.dumps(data))
    old = load(tmp_path)
    assert old.mode == "eager" and old.reach == 0.0
    assert old.targets[0].target.compile_share is None
