"""Which kernels stay in the model: the keep-or-drop decision, the no-regression guard, the mode
it is made in, the record use_kernels reads, and the prediction naming the target that missed."""

from __future__ import annotations

import itertools
import json

import pytest
import torch
import typer
from typer.testing import CliRunner
from verify_helpers import LLAMA_EXAMPLE, Tiny, starters, tiny_inputs, workspace_with

from autokernel import api
from autokernel.cli.verify import verify_command
from autokernel.model.verify import mode_record, prediction
from autokernel.model.verify.ablation import ablate
from autokernel.model.verify.cuda_graphs import CudaGraphError
from autokernel.model.verify.modes import summarize
from autokernel.model.verify.timing import Timed, _guard, time_model
from autokernel.model.verify.verifier import collect_kernels, conclude, verify_model

BASE_MS = 10.0


def fake_timer(effect_ms: dict[str, float], jitter: float = 0.002):
    """Forward ms: BASE_MS plus each plugged-in target's effect (negative: it saves time), with
    a fixed repeating relative jitter, so every run of a test decides the same way."""
    wobble = itertools.cycle([1.0, 1.0 + jitter, 1.0 - jitter, 1.0 + jitter / 2, 1.0 - jitter / 2])
    calls: list[frozenset[str]] = []

    def timer(kept: frozenset[str]) -> float:
        calls.append(kept)
        return (BASE_MS + sum(effect_ms[t] for t in kept)) * next(wobble)

    return timer, calls


# --- the keep-or-drop decision per target --------------------------------------------------


def test_a_kernel_that_slows_the_forward_is_dropped_first_and_helpers_stay():
    timer, _ = fake_timer({"rmsnorm": -1.0, "softmax": +0.8, "reduce": -0.3})
    result = ablate(["rmsnorm", "softmax", "reduce"], timer, "compile", rounds=5)
    assert result.kept == ["rmsnorm", "reduce"]
    assert list(result.dropped) == ["softmax"]
    assert "slower with it" in result.dropped["softmax"]  # 8 % slower, ±0.2 % noise
    assert result.dropped["softmax"].endswith("slower beyond the noise")
    e = result.effects
    assert e["softmax"].ratio < 1.0 < e["reduce"].ratio < e["rmsnorm"].ratio
    assert e["rmsnorm"].with_ms == pytest.approx(BASE_MS - 1.0 + 0.8 - 0.3, rel=0.01)


def test_the_kept_sets_effects_are_measured_without_the_dropped_kernels():
    """A slow kernel dropped later sat in both sides of every first-pass ratio: matmul's ratio
    was 13 / 8 with it in, 10 / 5 once it is out. The prediction takes the last pass's (the
    set the user gets), which matches the forward the user runs."""
    timer, _ = fake_timer({"matmul": -5.0, "slow": +3.0})
    result = ablate(["matmul", "slow"], timer, "eager", rounds=5)
    assert result.kept == ["matmul"] and set(result.kept_effects) == {"matmul"}
    assert result.effects["matmul"].ratio == pytest.approx(13 / 8, rel=0.01)
    assert result.kept_effects["matmul"].ratio == pytest.approx(10 / 5, rel=0.01)
    ratios = mode_record.ratios(result.to_json())
    predicted = prediction.from_effects(BASE_MS, ratios, result.kept)
    assert predicted == pytest.approx(result.kept_ms, rel=0.01)
    first_pass = mode_record.ratios({"effects": result.to_json()["effects"]})
    assert not prediction.check("patched", prediction.EFFECTS,
                                prediction.from_effects(BASE_MS, first_pass, result.kept),
                                result.kept_ms, {}, first_pass).holds  # fmt: skip
    none_kept = ablate(["slow"], timer, "eager")
    assert none_kept.kept == [] and none_kept.kept_effects == {}


def test_a_gain_inside_the_noise_or_below_one_percent_is_dropped():
    timer, _ = fake_timer({"rmsnorm": -0.05, "softmax": -2.0})  # 0.5 %: below MIN_GAIN
    assert ablate(["rmsnorm", "softmax"], timer, "eager").kept == ["softmax"]
    noisy, _ = fake_timer({"rmsnorm": -0.3}, jitter=0.08)  # 3 % gain, ±8 % jitter
    quiet, _ = fake_timer({"rmsnorm": -0.3}, jitter=0.001)
    dropped = ablate(["rmsnorm"], noisy, "eager")
    assert dropped.kept == [] and dropped.dropped["rmsnorm"].endswith(": not beyond the noise")
    assert ablate(["rmsnorm"], quiet, "eager").kept == ["rmsnorm"]


def test_when_every_kernel_helps_one_pass_decides():
    """Backward elimination's cost when all help: k + 1 sets, once per round."""
    timer, calls = fake_timer({"a": -1.0, "b": -0.5, "c": -0.7})
    result = ablate(["a", "b", "c"], timer, "eager", rounds=3)
    assert result.kept == ["a", "b", "c"] and not result.dropped
    assert result.timings == len(calls) == 4 * 3
    assert set(calls) == {frozenset("abc"), frozenset("bc"), frozenset("ac"), frozenset("ab")}


def test_every_set_is_timed_in_every_round_in_rotated_order():
    timer, calls = fake_timer({"a": -1.0, "b": -1.0})
    ablate(["a", "b"], timer, "eager", rounds=3)
    rounds = [calls[i : i + 3] for i in range(0, 9, 3)]
    assert all(set(r) == {frozenset("ab"), frozenset("b"), frozenset("a")} for r in rounds)
    assert len({r[0] for r in rounds}) == 3  # no set always first


# --- selection and guard inside verify's timing, on a real (tiny) model --------------------


def variant_timer(effect_ms: dict[str, float]):
    """A fake timer for verify's variants: the cost of the kernels each one has plugged in."""
    seen: list[tuple[str, ...]] = []

    def timer(variant, on_gpu: bool) -> float:
        seen.append(tuple(variant.kernels))
        return BASE_MS + sum(effect_ms[k] for k in variant.kernels)

    return timer, seen


@pytest.mark.slow
def test_verify_keeps_only_what_helps_and_no_mode_is_slower_than_eager(tmp_path):
    kernels, _, _ = collect_kernels(workspace_with(tmp_path, starters("rmsnorm", "softmax")))
    timer, _ = variant_timer({"rmsnorm": -2.0, "softmax": +1.0})
    timed = time_model(
        Tiny(layers=1).eval(),
        tiny_inputs(),
        kernels,
        mode="eager",
        on_gpu=False,
        select=True,
        with_compile=False,
        rounds=3,
        timer=timer,
    )
    assert timed.ablation is not None and timed.ablation.kept == ["rmsnorm"]
    assert timed.kept["eager"] == ["rmsnorm"]
    assert timed.modes["patched"].kernels == ["rmsnorm"]
    assert timed.modes["patched"].ms == pytest.approx(BASE_MS - 2.0)

    # nothing helps: the patched mode runs as eager, so it is never slower
    hurt, _ = variant_timer({"rmsnorm": +0.5, "softmax": +1.0})
    timed = time_model(
        Tiny(layers=1).eval(),
        tiny_inputs(),
        kernels,
        mode="eager",
        on_gpu=False,
        select=True,
        with_compile=False,
        rounds=3,
        timer=hurt,
    )
    assert timed.kept["eager"] == [] and timed.modes["patched"].kernels == []
    assert timed.modes["patched"].ms == timed.modes["eager"].ms == BASE_MS


@pytest.mark.slow
def test_verify_records_its_choice_and_use_kernels_follows_it(tmp_path):
    ws = workspace_with(tmp_path, starters("rmsnorm", "softmax"))
    kernels, _, _ = collect_kernels(ws)
    result = verify_model(Tiny(layers=1).eval(), tiny_inputs(), kernels, select=True,
                          with_compile=False, rounds=2)  # fmt: skip
    conclude(result, kernels, ws)
    assert result.selection and result.selection["candidates"] == ["rmsnorm", "softmax"]
    record = json.loads((ws / "optimized" / "modes.json").read_text())
    assert record["eager"]["kept"] == result.kept["eager"]
    assert set(record["eager"]["effects"]) == {"rmsnorm", "softmax"}
    assert set(record["eager"]["kept_effects"]) == set(result.kept["eager"])
    assert set(api.load_kernels(ws, mode="eager").routers) == set(result.kept["eager"])
    (p,) = [p for p in result.predictions if p["source"] == prediction.EFFECTS]
    assert p["mode"] == "patched" and p["measured_ms"] == result.ms("patched")


def test_the_guard_leaves_out_kernels_that_do_not_beat_their_base():
    """Kernels chosen in eager mode that slow the compiled forward: compile+patched runs as
    compile; those that help the eager forward stay."""
    samples = {"eager": [10.0, 10.2, 9.9], "patched": [8.0, 8.1, 7.9],
               "compile": [5.0, 5.1, 4.9], "compile+patched": [6.0, 6.1, 5.9]}  # fmt: skip
    kept = ["rmsnorm", "softmax"]
    timed = Timed(clock="fake", mode="eager", kept={"eager": kept, "compile": kept})
    for m, s in samples.items():
        timed.modes[m] = summarize(m, s, [] if m in ("eager", "compile") else kept)
    _guard(timed, samples)
    assert timed.kept == {"eager": kept, "compile": []}
    assert timed.modes["patched"].kernels == kept
    cp = timed.modes["compile+patched"]
    assert cp.kernels == [] and cp.ms == timed.modes["compile"].ms and cp.rejected_ms == 6.0
    assert any("left out in compile mode" in n for n in timed.notes)


def test_a_captured_mode_is_judged_against_the_same_capture_without_our_kernels():
    """The graph's own gain is not our kernels': compile+cuda-graphs+patched at 4.1 ms beats
    compile at 4.25 but not the plain compiled capture at 4.1, so it reports no kernels, and
    optimized/ (the user's modes) is untouched by it."""
    samples = {"compile": [4.25, 4.26, 4.24], "compile+patched": [4.0, 4.01, 3.99],
               "compile+cuda-graphs": [4.1, 4.11, 4.09],
               "compile+cuda-graphs+patched": [4.1, 4.12, 4.08],
               "cuda-graphs": [5.0, 5.0, 5.0], "cuda-graphs+patched": [4.0, 4.0, 4.0]}  # fmt: skip
    kept = ["rmsnorm"]
    timed = Timed(clock="fake", mode="compile", kept={"eager": kept, "compile": kept})
    for m, s in samples.items():
        timed.modes[m] = summarize(m, s, kept if m.endswith("patched") else [])
    _guard(timed, samples)
    assert timed.kept == {"eager": kept, "compile": kept}
    captured = timed.modes["compile+cuda-graphs+patched"]
    assert captured.kernels == [] and captured.rejected_ms == 4.1
    assert timed.modes["cuda-graphs+patched"].kernels == kept  # 1.25x its own capture: stays
    assert any(n.startswith("compile+cuda-graphs+patched: rmsnorm made") for n in timed.notes)


# --- the record and use_kernels --------------------------------------------------------------


def test_use_kernels_plugs_in_only_what_helped_in_the_requested_mode(tmp_path):
    ws = workspace_with(tmp_path, starters("rmsnorm", "softmax"))
    mode_record.write(ws, "eager", {"kept": ["rmsnorm"], "effects": {"rmsnorm": {"ratio": 1.2}}})
    mode_record.write(ws, "compile", {"kept": []})
    assert set(api.load_kernels(ws, mode="eager").routers) == {"rmsnorm"}
    assert api.load_kernels(ws, mode="compile").routers == {}
    assert set(api.load_kernels(ws, mode="all").routers) == {"rmsnorm", "softmax"}
    assert mode_record.effects(ws, "eager") == {"rmsnorm": 1.2}
    mode_record.write(ws, "eager", {"kept": ["rmsnorm"], "effects": {"rmsnorm": {"ratio": 1.2}},
                                    "kept_effects": {"rmsnorm": {"ratio": 1.4}}})  # fmt: skip
    assert mode_record.effects(ws, "eager") == {"rmsnorm": 1.4}  # the kept set's, when recorded
    assert json.loads((ws / "optimized" / "modes.json").read_text())["compile"] == {"kept": []}
    # without a record every kernel is plugged in
    other = workspace_with(tmp_path / "o", starters("rmsnorm", "softmax"))
    assert set(api.load_kernels(other, mode="eager").routers) == {"rmsnorm", "softmax"}


@pytest.mark.slow
def test_cuda_graphs_on_a_cpu_model_is_a_clear_error(tmp_path):
    ws = workspace_with(tmp_path, starters("rmsnorm"))
    model = Tiny(layers=1).eval()
    with pytest.raises(CudaGraphError, match="needs the model on a CUDA device"):
        with api.use_kernels(model, ws, mode="all", cuda_graphs=True):
            pass
    assert "forward" not in vars(model)


@pytest.mark.gpu
def test_cuda_graphs_replay_matches_the_patched_forward(tmp_path):
    ws = workspace_with(tmp_path, starters("rmsnorm", "softmax"))
    model = Tiny(layers=1).eval().cuda()
    inputs = [x.cuda() for x in tiny_inputs()]
    with torch.no_grad(), api.use_kernels(model, ws, mode="all") as patch:
        want = [t.clone() for t in model(*inputs)]
    patch.close()
    with torch.no_grad(), api.use_kernels(model, ws, mode="all", cuda_graphs=True) as patch:
        model(*inputs)
        got = model(*inputs)  # a replay
    patch.close()
    for g, w in zip(got, want, strict=True):
        torch.testing.assert_close(g, w)


# --- mode selection on the command line -----------------------------------------------------


@pytest.mark.skipif(not LLAMA_EXAMPLE.exists(), reason="examples/llama_style.py not there yet")
def test_bad_mode_is_a_one_line_error(tmp_path):
    app = typer.Typer()
    app.command("verify")(verify_command)
    app.callback()(lambda: None)
    ws = workspace_with(tmp_path, starters("rmsnorm"))
    base = ["verify", str(LLAMA_EXAMPLE), "-w", str(ws), "--device", "cpu"]
    res = CliRunner().invoke(app, [*base, "--mode", "fast"])
    assert res.exit_code == 2 and "use one of eager, compile" in res.output
    res = CliRunner().invoke(app, [*base, "--mode", "compile", "--no-compile"])
    assert res.exit_code == 2 and "drop --no-compile" in res.output


def test_default_mode_follows_the_models_device(tmp_path):
    kernels, _, _ = collect_kernels(workspace_with(tmp_path, starters("rmsnorm")))
    result = verify_model(Tiny(layers=1).eval(), tiny_inputs(), kernels, timing=False)
    assert result.mode == "eager"  # a CPU model: eager; a CUDA one: compile (test_mode.py)
    result = verify_model(Tiny(layers=1).eval(), tiny_inputs(), kernels, timing=False,
                          mode="compile")  # fmt: skip
    assert result.mode == "compile"


# --- predictions ------------------------------------------------------------------------------


def test_a_prediction_that_misses_names_the_target_whose_gain_did_not_show():
    expected = {"rmsnorm": 1.15, "softmax": 1.05}  # from the kernels' speedups
    measured = {"rmsnorm": 0.75, "softmax": 1.04}  # whole-model effects
    p = prediction.check("patched", prediction.KERNELS, 8.0, 10.7, expected, measured)
    assert not p.holds and p.missed == "rmsnorm"
    assert "rmsnorm's gain did not show up" in p.message and "0.75x" in p.message
    near = prediction.check("patched", prediction.KERNELS, 10.0, 10.7, expected, measured)
    assert near.holds and near.missed is None and not near.message
    blind = prediction.check("patched", prediction.KERNELS, 8.0, 10.7, expected, {})
    assert blind.missed is None and "cannot say which target" in blind.message


def test_the_prediction_from_whole_model_effects_composes_the_kept_ratios():
    ratios = {"rmsnorm": 1.25, "softmax": 1.6, "reduce": 0.9}
    assert prediction.from_effects(10.0, ratios, ["rmsnorm", "softmax"]) == pytest.approx(5.0)
    assert prediction.from_effects(10.0, ratios, []) == pytest.approx(10.0)
    assert prediction.from_effects(10.0, ratios, ["matmul"]) is None  # not measured


@pytest.mark.parametrize("clock", ["cpu", "cuda"])
def test_interpreter_times_get_no_prediction_check(tmp_path, clock):
    """On the CPU without a selection the times are the interpreter's: a prediction check
    would print a meaningless miss, so a note says why there is none; on a GPU it runs."""
    from autokernel.model.verify.verifier import VerifyResult
    from autokernel.timing import CPU_CLOCK, CUDA_CLOCK

    ws = workspace_with(tmp_path, starters("rmsnorm"))
    kernels, _, _ = collect_kernels(ws)
    modes = {m: {"ms": ms, "spread": 0.0, "kernels": []} for m, ms in
             (("eager", 10.0), ("patched", 9.0))}  # fmt: skip
    result = VerifyResult(model="m", device="cpu", dtype="float32", kernels={}, outputs=[],
                          calls={"rmsnorm": {"kernel": 1}},
                          clock=CPU_CLOCK if clock == "cpu" else CUDA_CLOCK, modes=modes,
                          kept={"eager": ["rmsnorm"]})  # fmt: skip
    conclude(result, kernels, ws)
    noted = any("no prediction check" in n for n in result.notes)
    assert noted == (clock == "cpu")
    if clock == "cpu":
        assert result.predictions == []
