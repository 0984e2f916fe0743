"""Hugging Face families whose hot parts were not matched, built from tiny random configs: GPT-
NeoX (partial rotary), Phi-3 (gate and up fused in one Linear) and OLMo2 (fp32 cos/sin beside
bf16 q/k). profile must plan the target and verify plug a kernel into every one of its calls
with the model's outputs unchanged; fast here with reference.py as the kernel, and (slow) with
the shipped starters under the Triton interpreter, where a wrong kernel must fail."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from verify_helpers import starters, workspace_with

from autokernel.model.loading import ModelSource, load_model
from autokernel.model.profiling.profiler import run_profile, write_plan
from autokernel.model.verify.verifier import collect_kernels, verify_model
from autokernel.targets import from_plan
from tests.test_matching import kernels_for

transformers = pytest.importorskip("transformers")

TINY = dict(hidden_size=64, intermediate_size=128, num_hidden_layers=2, num_attention_heads=4,
            vocab_size=256, max_position_embeddings=64)  # fmt: skip
# family -> (config class, extra settings, dtype, the kernel types its fix made it plan)
FAMILIES = {
    "gpt_neox": ("GPTNeoXConfig", {"rotary_pct": 0.25}, "float32", {"rotary_embedding"}),
    "phi3": ("Phi3Config", {"pad_token_id": 0}, "float32", {"fused_mlp", "rotary_embedding"}),
    "olmo2": ("Olmo2Config", {}, "bfloat16", {"rotary_embedding"}),
}


def load(tmp_path: Path, family: str, dtype: str | None = None):
    cls, extra, default, _ = FAMILIES[family]
    path = tmp_path / f"{family}.json"
    getattr(transformers, cls)(**TINY, **extra).to_json_file(path)
    torch.manual_seed(0)
    return load_model(ModelSource(hf_config=str(path), input_shape=(2, 8),
                                  dtype=dtype or default, device="cpu"))  # fmt: skip


def planned(tmp_path: Path, loaded) -> Path:
    plan = tmp_path / "plan.yaml"
    write_plan(run_profile(loaded, iters=1, warmup=0), plan)
    return plan


@pytest.mark.parametrize("family", FAMILIES)
def test_the_family_plans_its_target_and_verify_runs_it_everywhere(family, tmp_path):
    loaded = load(tmp_path, family)
    plan = planned(tmp_path, loaded)
    want = FAMILIES[family][3]
    assert want <= {t.kernel_type for t in from_plan(plan)}
    kernels = [k for k in kernels_for(plan) if k.kernel_type in want]
    result = verify_model(loaded.model, loaded.inputs, kernels, timing=False)
    assert not result.errors and result.outputs_match, (result.errors, result.outputs)
    for kind in want:  # every layer's call ran the kernel: 2 layers, q and k each for rotary
        calls = result.calls[kind]
        assert calls["fallback"] == 0, calls
        assert calls["kernel"] == (4 if kind == "rotary_embedding" else 2), calls


@pytest.mark.slow
@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
@pytest.mark.parametrize("family", FAMILIES)
def test_the_shipped_starters_pass_in_the_family(family, dtype, tmp_path):
    loaded = load(tmp_path, family, dtype)
    want = FAMILIES[family][3]
    kernels, _, notes = collect_kernels(workspace_with(tmp_path, starters(*want)))
    assert not notes
    result = verify_model(loaded.model, loaded.inputs, kernels, timing=False)
    assert not result.errors and result.outputs_match and result.ok, result.outputs
    assert all(result.calls[k]["kernel"] > 0 and result.calls[k]["fallback"] == 0 for k in want)


WRONG = {  # a kernel that computes something else at the families' calls
    "rotary_embedding": ("return run(x, cos, sin)", "return run(x, cos, -sin)"),
    "fused_mlp": ("return run(x, w_gate, w_up, w_down)", "return run(x, w_up, w_gate, w_down)"),
}


@pytest.mark.slow
@pytest.mark.parametrize(("family", "kind"), [("gpt_neox", "rotary_embedding"),
                                              ("phi3", "fused_mlp"),
                                              ("olmo2", "rotary_embedding")])  # fmt: skip
def test_a_wrong_kernel_fails_in_the_family(family, kind, tmp_path, monkeypatch):
    """In fp32, where the tolerance is tight enough to see a tiny random model's change."""
    monkeypatch.setenv("AUTOKERNEL_TRUST_UNJUDGED", "1")  # a hand-broken kernel no run judged
    loaded = load(tmp_path, family, "float32")
    good, bad = WRONG[kind]
    text = starters(kind)[kind]
    assert text.count(good) == 1
    kernels, _, _ = collect_kernels(workspace_with(tmp_path, {kind: text.replace(good, bad)}))
    result = verify_model(loaded.model, loaded.inputs, kernels, timing=False)
    assert result.calls[kind]["kernel"] > 0
    assert not result.outputs_match and not result.ok


@pytest.mark.slow
def test_a_swapped_fused_gate_up_fails_in_bf16_against_the_float32_answer(tmp_path, monkeypatch):
    """bf16, where the eager rule alone allows ~10 % of the output's scale: swapping gate and up
    moved Phi-3's logits by 0.03 of their scale, so only the float32 reference catches it."""
    monkeypatch.setenv("AUTOKERNEL_TRUST_UNJUDGED", "1")
    loaded = load(tmp_path, "phi3", "bfloat16")
    good, bad = WRONG["fused_mlp"]
    text = starters("fused_mlp")["fused_mlp"]
    kernels, _, _ = collect_kernels(
        workspace_with(tmp_path, {"fused_mlp": text.replace(good, bad)})
    )
    result = verify_model(loaded.model, loaded.inputs, kernels, timing=False)
    assert result.calls["fused_mlp"]["kernel"] > 0
    (check,) = result.outputs
    assert check.rule == "fp32-reference" and not check.ok, check
