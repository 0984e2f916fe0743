"""The loop's contract with the morning reader: commits, refs, rows, move-on rules, budgets.

Runs against a stand-in harness (speed from CONFIG) so each case takes well under a second;
tests/test_run_cli.py drives the real harness end to end.
"""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
from loop_helpers import (
    FakeHarness,
    ScriptedAgent,
    invalid,
    make_loop,
    planted,
    set_config,
)

from autokernel.agents.tuner import read_config
from autokernel.run.results import COLUMNS, ResultsLog
from autokernel.run.state import load
from autokernel.targets import Target


def git(root: Path, *args: str) -> str:
    return subprocess.run(
        ["git", *args], cwd=root, capture_output=True, text=True, check=True
    ).stdout.strip()


def rows(root: Path) -> list[dict[str, str]]:
    return ResultsLog(root / "results.tsv").read()


@pytest.mark.slow
def test_tuner_run_leaves_commits_refs_and_rows(tmp_path):
    # default_speed rewards only BLOCK_SIZE 8192; the starter's SEARCH_SPACE reaches it after
    # its VARIANT and SPLIT_CHUNK moves, within twelve experiments (revisits included)
    loop, _ = make_loop(tmp_path, max_experiments=12)
    assert loop.run() == "reached --max-experiments 12"
    got = rows(tmp_path)
    assert [int(r["experiment"]) for r in got] == list(range(12))
    assert got[0]["agent"] == "starter" and got[0]["status"] == "keep"
    # default_speed: BLOCK_SIZE 4096 -> 8192 halves the time; VARIANT and num_warps cost
    by_status = {int(r["experiment"]): r["status"] for r in got}
    assert "keep" in list(by_status.values())[1:] and "revert" in by_status.values()
    for r in got:
        full = git(tmp_path, "rev-parse", r["commit"])  # every hash in results.tsv resolves
        msg = git(tmp_path, "log", "-1", "--format=%s", full)
        assert msg.startswith(f"exp {r['experiment']} [softmax]: ")
        touched = git(tmp_path, "show", "--name-only", "--format=", full).split()
        assert touched == ["kernel.py"]  # an experiment commit touches only kernel.py
        if r["status"] == "revert":
            assert git(tmp_path, "rev-parse", f"refs/autokernel/attempts/{r['experiment']}") == full
    kept = [r for r in got if r["status"] == "keep"]
    # HEAD is the last kept commit, or a target's optimized/ commit on top of it
    git(tmp_path, "merge-base", "--is-ancestor", kept[-1]["commit"], "HEAD")
    best = git(tmp_path, "show", f"{kept[-1]['commit']}:kernel.py")
    assert git(tmp_path, "show", "HEAD:kernel.py") == best
    # the working kernel.py is the best one, and it is the fastest config evaluated
    config, _ = read_config((tmp_path / "kernel.py").read_text())
    assert config["BLOCK_SIZE"] == 8192
    assert git(tmp_path, "rev-parse", "--abbrev-ref", "HEAD") == "autokernel/t1"
    assert git(tmp_path, "status", "--porcelain") == ""  # results.tsv, .autokernel excluded
    lines = (tmp_path / "results.tsv").read_text().splitlines()
    assert lines[0].split("\t") == list(COLUMNS) and all(
        len(line.split("\t")) == len(COLUMNS) for line in lines
    )


def test_reverted_commits_stay_reachable_off_the_branch(tmp_path):
    loop, _ = make_loop(tmp_path, max_experiments=4)
    loop.run()
    reverted = [r for r in rows(tmp_path) if r["status"] == "revert"]
    assert reverted
    branch = git(tmp_path, "rev-list", "HEAD").split()
    for r in reverted:
        sha = git(tmp_path, "rev-parse", f"refs/autokernel/attempts/{r['experiment']}")
        assert sha.startswith(r["commit"]) and sha not in branch
        assert "CONFIG" in git(tmp_path, "show", sha, "--", "kernel.py")  # the diff is kept


@pytest.mark.slow
def test_tuner_never_repeats_a_config(tmp_path):
    loop, _ = make_loop(tmp_path, max_experiments=14)
    loop.run()
    got = rows(tmp_path)
    sources = [git(tmp_path, "show", f"{r['commit']}:kernel.py") for r in got
               if r["agent"] in ("tuner", "starter")]  # fmt: skip
    configs = [repr(sorted(read_config(s)[0].items())) for s in sources]
    assert len(configs) == len(set(configs)) >= 10
    # five reverts in a row end round 1; round 2 searches on from the best (still in place,
    # so it is not re-measured)
    assert load(tmp_path).targets[0].rounds >= 2 and not any(r["agent"] == "best" for r in got)


def test_five_reverts_in_a_row_move_on_and_commit_the_best(tmp_path):
    slower = FakeHarness(speed=lambda c: 100.0 if c["BLOCK_SIZE"] == 4096 else 150.0)
    agent = ScriptedAgent([set_config(num_warps=w) for w in (1, 2, 4, 16)] + [planted("FAIL")])
    loop, _ = make_loop(tmp_path, slower, agent=agent, revisit=False)
    loop.run()
    state = load(tmp_path)
    ts = state.targets[0]
    assert ts.status == "done" and "5 experiments in a row" in ts.reason
    assert [r["status"] for r in rows(tmp_path)] == ["keep", "revert", "revert", "revert",
                                                      "revert", "fail"]  # fmt: skip
    optimized = (tmp_path / "optimized" / "softmax.py").read_text()
    assert optimized == git(tmp_path, "show", f"{ts.best_commit}:kernel.py") + "\n"
    assert optimized == (tmp_path / "kernel.py").read_text()
    assert git(tmp_path, "log", "-1", "--format=%s").startswith("optimized [softmax]")
    assert loop.run() == "every target is finished"


def test_peak_rule_moves_on_at_90_percent(tmp_path):
    loop, _ = make_loop(tmp_path, FakeHarness(peak_us=95.0))  # the starter: 95 % of peak
    loop.run()
    ts = load(tmp_path).targets[0]
    assert ts.status == "done" and "of the roofline" in ts.reason and ts.experiments == 1


def test_peak_rule_does_not_fire_below_90_percent(tmp_path):
    loop, _ = make_loop(tmp_path, FakeHarness(peak_us=85.0), max_experiments=2)
    loop.run()
    assert load(tmp_path).targets[0].status == "active"


def test_speedup_rule_moves_on_at_2x_over_eager(tmp_path):
    two = [Target("softmax", "softmax", share=0.6), Target("rmsnorm", "rmsnorm", share=0.4)]
    agent = ScriptedAgent([set_config(BLOCK_SIZE=8192)])
    harness = FakeHarness(eager_us=150.0)
    loop, _ = make_loop(tmp_path, harness, agent=agent, targets=two, max_experiments=3)
    loop.run()  # starter 100 µs (1.5x); BLOCK_SIZE 8192 gives 50 µs (3x)
    got = rows(tmp_path)
    assert [(r["target"], r["status"]) for r in got] == [
        ("softmax", "keep"), ("softmax", "keep"), ("rmsnorm", "keep"),
    ]  # fmt: skip
    assert float(got[1]["speedup_vs_eager"]) >= 2.0  # moved on right after reaching 2x
    assert "faster than eager" in load(tmp_path).target("softmax").reason


def test_a_lone_target_past_2x_keeps_the_night(tmp_path):
    """2x only means "elsewhere first": alone in the run, the target comes back for the time
    left instead of ending the night after its first experiment."""
    loop, _ = make_loop(tmp_path, FakeHarness(eager_us=300.0), max_experiments=4)
    loop.run()  # the starter is 3x eager from experiment 0
    ts = load(tmp_path).targets[0]
    assert len(rows(tmp_path)) == 4 and ts.rounds == 2 and not ts.final


def test_two_hours_on_one_target_moves_on_counted_per_target(tmp_path):
    # One speed for every config: only the clock may move a target on here.
    harness = FakeHarness(speed=lambda config: 100.0, seconds_per_eval=2500.0, clock=[0.0])
    two = [Target("softmax", "softmax", share=0.6), Target("rmsnorm", "rmsnorm", share=0.4)]
    agent = ScriptedAgent([set_config(num_warps=w) for w in (1, 2)] + [set_config(num_warps=4)])
    loop, _ = make_loop(tmp_path, harness, agent=agent, targets=two, max_experiments=4)
    loop.run()
    state = load(tmp_path)
    soft, rms = state.target("softmax"), state.target("rmsnorm")
    assert soft.status == "done" and "h spent on it" in soft.reason
    assert soft.seconds >= 7200 and soft.experiments == 3
    assert rms.status == "active" and rms.seconds < 7200  # its own clock starts at zero
    assert [r["target"] for r in rows(tmp_path)] == ["softmax"] * 3 + ["rmsnorm"]


def test_targets_are_taken_in_amdahl_order(tmp_path):
    small, big = Target("rmsnorm", "rmsnorm", share=0.1), Target("softmax", "softmax", share=0.7)
    loop, _ = make_loop(tmp_path, targets=[small, big], max_experiments=1)
    loop.run()
    assert rows(tmp_path)[0]["target"] == "softmax"


def test_hours_budget_ends_the_run_normally(tmp_path):
    harness = FakeHarness(seconds_per_eval=600.0, clock=[0.0])
    loop, _ = make_loop(tmp_path, harness, hours=0.5)
    assert "--hours budget" in loop.run()
    assert len(rows(tmp_path)) == 3
    assert load(tmp_path).seconds >= 1800


def test_agent_with_nothing_left_moves_on(tmp_path):
    loop, _ = make_loop(tmp_path, agent=ScriptedAgent([None]))
    assert loop.run() == "every target is finished"
    assert "nothing left to try" in load(tmp_path).targets[0].reason


def test_invalid_replies_commit_nothing_and_count_toward_moving_on(tmp_path):
    agent = ScriptedAgent([invalid(7) for _ in range(5)])
    loop, _ = make_loop(tmp_path, agent=agent, revisit=False)
    loop.run()
    state = load(tmp_path)
    got = rows(tmp_path)  # the baseline, then one "invalid" row per reply, nothing committed
    assert [r["status"] for r in got] == ["keep"] + ["invalid"] * 5
    assert [r["commit"] for r in got[1:]] == ["-"] * 5
    assert [int(r["experiment"]) for r in got] == list(range(6))
    assert git(tmp_path, "rev-list", "--count", "HEAD") == "2"  # baseline + optimized
    assert state.tokens == 35 and "in a row" in state.targets[0].reason


def test_failed_experiment_is_reverted_and_its_error_reaches_the_agent(tmp_path):
    agent = ScriptedAgent([planted("CRASH"), set_config(num_warps=4)])
    loop, _ = make_loop(tmp_path, agent=agent, max_experiments=3)
    loop.run()
    assert [r["status"] for r in rows(tmp_path)] == ["keep", "crash", "revert"]
    assert "fake-status" not in (tmp_path / "kernel.py").read_text()
    assert agent.contexts[1].last_failure and "CRASH" in agent.contexts[1].last_failure
    assert agent.contexts[1].history[-1]["status"] == "crash"


def test_close_results_are_remeasured_interleaved(tmp_path):
    # 8 % faster with 10 % spreads: not clear, so the best and the candidate are re-timed
    speeds = {8: 100.0, 4: 92.6, 2: 90.0}  # 8 %, then 2.9 %: both within 3 spreads
    harness = FakeHarness(speed=lambda c: speeds[c["num_warps"]], spread=0.1)
    harness.compare_result = (1.08, 0.02)
    agent = ScriptedAgent([set_config(num_warps=4), set_config(num_warps=2)])
    loop, _ = make_loop(tmp_path, harness, agent=agent, max_experiments=2)
    loop.run()
    assert harness.compared == 1 and rows(tmp_path)[1]["status"] == "keep"
    harness.compare_result = (1.004, 0.02)
    loop.settings.max_experiments = 3
    loop.run()
    assert harness.compared == 2 and rows(tmp_path)[2]["status"] == "revert"


def test_clearly_slower_or_faster_needs_no_remeasure(tmp_path):
    loop, harness = make_loop(tmp_path, max_experiments=4)
    loop.run()
    assert harness.compared == 0


def test_token_budget_stops_the_run(tmp_path):
    agent = ScriptedAgent([set_config(num_warps=w) for w in (1, 2, 4, 16)])
    loop, _ = make_loop(tmp_path, agent=agent, max_tokens=150)
    assert "--max-tokens" in loop.run()
    assert len(rows(tmp_path)) == 3  # baseline + two proposals of 100 tokens


def test_stop_request_finishes_the_current_experiment_first(tmp_path):
    harness = FakeHarness()
    loop, _ = make_loop(tmp_path, harness)
    harness.hook = lambda source: setattr(loop, "stop_requested", len(harness.evaluated) >= 2)
    reason = loop.run()
    assert "Ctrl-C" in reason
    assert len(rows(tmp_path)) == 2 and load(tmp_path).in_flight is None


def test_resume_refuses_a_branch_someone_else_committed_to(tmp_path):
    from loop_helpers import reopen

    from autokernel.loop import RunError

    loop, harness = make_loop(tmp_path, max_experiments=2)
    loop.run()
    (tmp_path / "notes.txt").write_text("mine")
    git(tmp_path, "add", "notes.txt")
    git(tmp_path, "commit", "-qm", "user commit")
    with pytest.raises(RunError, match="someone committed"):
        reopen(tmp_path, harness).run()


@pytest.mark.slow
def test_a_target_moved_on_from_comes_back_when_time_is_left(tmp_path):
    two = [Target("softmax", "softmax", share=0.6), Target("rmsnorm", "rmsnorm", share=0.4)]
    script = [set_config(num_warps=w) for w in (1, 2, 4, 16, 1)]  # softmax: 5 slower
    script += [None]  # rmsnorm: nothing to try, finished for good
    script += [set_config(BLOCK_SIZE=8192)]  # softmax, round 2: from its best kernel
    agent = ScriptedAgent(script)
    loop, _ = make_loop(tmp_path, agent=agent, targets=two, max_experiments=9)
    loop.run()
    got = rows(tmp_path)
    soft = load(tmp_path).target("softmax")
    assert soft.rounds == 2 and load(tmp_path).target("rmsnorm").final
    back = next(r for r in got if r["agent"] == "best")
    assert back["target"] == "softmax" and back["status"] == "keep"
    # round 2's first commit is softmax's best kernel, on top of rmsnorm's commits: nothing
    # of the other target is rewound
    assert [r["target"] for r in got] == ["softmax"] * 6 + ["rmsnorm"] + ["softmax"] * 2
    baseline_kernel = git(tmp_path, "show", f"{got[0]['commit']}:kernel.py")
    assert git(tmp_path, "show", f"{back['commit']}:kernel.py") == baseline_kernel
    assert got[-1]["status"] == "keep"
    rms_commit = got[6]["commit"]  # raises if rmsnorm's commit fell off the branch:
    git(tmp_path, "merge-base", "--is-ancestor", rms_commit, "HEAD")


def test_close_calls_are_decided_at_the_models_real_shapes(tmp_path):
    speeds = {8: 100.0, 4: 95.0}
    harness = FakeHarness(speed=lambda c: speeds[c["num_warps"]], spread=0.1)
    sizes = [
        {"size": "64x1024", "ratio": 1.2, "noise": 0.01},  # a spec size: faster there
        {"size": "8x4096", "ratio": 0.97, "noise": 0.01},
    ]  # the model's shape: slower
    harness.compare_result = (1.08, 0.01, sizes)
    shaped = Target("softmax", "softmax", shapes=({"rows": 8, "cols": 4096},))
    agent = ScriptedAgent([set_config(num_warps=4)])
    loop, _ = make_loop(tmp_path, harness, agent=agent, targets=[shaped], max_experiments=2)
    loop.run()
    assert harness.compared == 1 and rows(tmp_path)[1]["status"] == "revert"


@pytest.mark.slow
def test_cpu_figures_never_trigger_the_2x_rule(tmp_path):
    """Under the interpreter, x-vs-eager compares the interpreter with CPU PyTorch: no reason to
    stop working on a kernel."""
    loop, _ = make_loop(tmp_path, FakeHarness(eager_us=150.0), max_experiments=14)
    loop.settings.on_gpu = False
    loop.run()
    ts = load(tmp_path).targets[0]
    assert ts.best.speedup_vs_eager >= 2.0 and "eager" not in ts.reason


def test_a_config_out_of_shared_memory_reaches_the_agent(tmp_path):
    """A compile that ran out of shared memory is remembered in the state and handed to the
    agent, so the tuner never spends an experiment on a config at least as large
    (tests/test_tuner.py shows the pruning itself)."""
    from autokernel.harness.verdict import Check, Status, Verdict

    class SmallGPU(FakeHarness):
        def evaluate(self, path, opts=None, on_phase=None):
            config, _ = read_config(Path(path).read_text())
            if config["BLOCK_SIZE"] >= 8192:
                msg = (
                    "crash in compile 64x1024 float32: kernel_fn raised OutOfResources: out "
                    "of resource: shared memory, Required: 262144, Hardware limit: 232448"
                )
                fail = Check("compile", "64x1024", "float32", False, msg)
                return Verdict(status=Status.CRASH, kernel_type="softmax", message=msg,
                               failure=fail)  # fmt: skip
            return super().evaluate(path, opts, on_phase)

    agent = ScriptedAgent([set_config(BLOCK_SIZE=8192), set_config(num_warps=4)])
    loop, _ = make_loop(tmp_path, SmallGPU(), agent=agent, max_experiments=3)
    loop.run()
    assert [r["status"] for r in rows(tmp_path)] == ["keep", "crash", "revert"]
    oversized = load(tmp_path).targets[0].oversized_configs
    assert [c["BLOCK_SIZE"] for c in oversized] == [8192]
    assert agent.contexts[0].oversized_configs == []
    assert agent.contexts[1].oversized_configs == oversized  # the next proposal knows
    # the slower num_warps=4 (reverted) is not taken for one that ran out of resources
