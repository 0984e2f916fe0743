"""The parallel run's parts on their own: the slot check, the rival rule, distinct proposals
from the tuner and the prompt, the job a worker runs, and the errors a user can meet."""

from __future__ import annotations

import sys

import pytest
from typer.testing import CliRunner

from autokernel.agents.base import Context
from autokernel.agents.prompt import build_request
from autokernel.agents.tuner import Tuner, read_config
from autokernel.backends import starter_path
from autokernel.cli import app
from autokernel.eval_job import EVALUATE, Job, run_job
from autokernel.pool import PoolError
from autokernel.run.parallel_keep import Calibration, judge_slots, rival_reason
from autokernel.run.results import ResultRow, RowStatus
from autokernel.run.state import Score


def test_the_fastest_slot_is_the_reference_and_a_slower_one_is_flagged():
    got = judge_slots([Calibration("a", 100.0, 0.01), Calibration("b", 112.0, 0.01),
                       Calibration("c", 103.0, 0.01), Calibration("d", None)])  # fmt: skip
    assert [(v.slot, v.status) for v in got] == [
        ("a", "ok"), ("b", "slow"), ("c", "ok"), ("d", "broken")
    ]  # fmt: skip
    assert got[1].ratio == pytest.approx(1.12)


def test_a_noisy_reading_is_not_called_slow():
    # 8 % slower, but its own spread is 4 %: three spreads cover it
    got = judge_slots([Calibration("a", 100.0, 0.04), Calibration("b", 108.0, 0.04)])
    assert [v.status for v in got] == ["ok", "ok"]


def test_rivals_need_a_changed_best_and_a_win_over_the_old_one():
    base, fast = Score(us=100.0, spread=0.01), Score(us=80.0, spread=0.01)
    assert rival_reason("b0", base, "b1", fast) is not None  # best changed; it beat b0
    assert rival_reason("b0", base, "b0", fast) is None  # same best: the usual rule
    assert rival_reason("b0", base, "b1", Score(us=100.5, spread=0.01)) is None  # no win


def _ctx(source: str, in_flight: list[dict]) -> Context:
    return Context(experiment=3, target="softmax", kernel_type="softmax", program="",
                   spec_text="", reference_source="", kernel_source=source,
                   in_flight=in_flight)  # fmt: skip


def test_the_tuner_skips_configs_in_flight_without_counting_them_as_losses():
    source = starter_path("softmax", "triton").read_text()
    first = Tuner().propose(_ctx(source, []))
    busy = [{"experiment": 1, "hypothesis": first.hypothesis,
             "config": read_config(first.source)[0]}]  # fmt: skip
    second = Tuner().propose(_ctx(source, busy))
    assert read_config(second.source)[0] != read_config(first.source)[0]


def test_the_prompt_lists_what_is_being_evaluated_beside_the_request():
    ctx = _ctx("x = 1\n", [{"experiment": 7, "hypothesis": "wider tiles for long rows"}])
    text = build_request(ctx)
    assert "Being evaluated now" in text and "exp 7: wider tiles for long rows" in text
    assert "Being evaluated now" not in build_request(_ctx("x = 1\n", []))


def test_a_job_is_evaluated_from_its_source_in_the_same_sandbox(tmp_path):
    bad = "KERNEL_TYPE = 'softmax'\nimport os\n"  # the static guard refuses it in the worker
    out = run_job(Job("exp 1", EVALUATE, [bad], {"timeout_s": 60.0, "quick": True}))
    assert out["verdict"]["status"] == "REJECTED"
    assert "os" in out["verdict"]["message"]


def test_a_ray_address_without_ray_installed_is_one_line_naming_the_extra(monkeypatch):
    from autokernel.ray_pool import RayPool

    monkeypatch.setitem(sys.modules, "ray", None)  # import ray raises ImportError
    with pytest.raises(PoolError, match=r"pip install 'torch-autokernel\[ray\]'"):
        RayPool("auto", 2, on_gpu=False)


@pytest.mark.parametrize(
    "args,message",
    [(["--workers", "0"], "--workers must be 1 or more"),
     (["--ray-address", " "], "--ray-address is empty")],
)  # fmt: skip
def test_bad_parallel_flags_are_a_clear_error(tmp_path, args, message):
    out = CliRunner().invoke(app, ["run", "--kernel", "softmax", *args, "-w", str(tmp_path)])
    assert out.exit_code == 2 and message in out.output
    assert not (tmp_path / ".git").exists()


def test_the_live_view_shows_each_worker_and_the_rate(tmp_path):
    from io import StringIO

    from rich.console import Console

    from autokernel.run.state import new_state
    from autokernel.targets import single
    from autokernel.views.live import RunView

    out = StringIO()
    console = Console(file=out, width=200)
    view = RunView(tmp_path, quiet=True, console=console)
    view.update(new_state("t", "tuner", 1.0, [single("softmax")]))
    view.worker("w0", "exp 3: sweep")
    view.worker("w1", "idle")
    view.experiment(ResultRow(3, None, "softmax", None, RowStatus.REVERT), "slower")
    console.print(view._render())
    text = out.getvalue()
    assert "w0: exp 3: sweep (" in text and "w1: idle" in text
    assert "experiments/h" in text
