"""The float32 reference rule on tiny bf16 Hugging Face models, every starter plugged in under
Triton's interpreter: right kernels pass, and wrong kernels the eager rule lets through (SiLU
for Gemma's GELU, a LayerNorm eps 10x too large) fail. Sizes and seeds are among those measured
in docs/verify-tolerance.md, where the margins are."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
import torch
from test_verify_reference import assert_same, snapshot
from verify_helpers import KERNELS

from autokernel.model.kernel_ops import LoadedKernel, load_kernel
from autokernel.model.name_shield import shield_kernels_name
from autokernel.model.verify import verifier
from autokernel.model.verify.outputs import REFERENCE, REFERENCE_FACTOR
from autokernel.model.verify.verifier import verify_model
from autokernel.specs import mlp_model

transformers = pytest.importorskip("transformers")

WIDTHS = {"hidden_size": 64, "intermediate_size": 128, "num_hidden_layers": 2,
          "num_attention_heads": 4, "num_key_value_heads": 2, "vocab_size": 256,
          "max_position_embeddings": 64}  # fmt: skip
FAMILIES = {
    "llama": ("LlamaConfig", "LlamaForCausalLM", WIDTHS),
    "qwen2": ("Qwen2Config", "Qwen2ForCausalLM", WIDTHS),
    "mistral": ("MistralConfig", "MistralForCausalLM", WIDTHS),
    "phi3": ("Phi3Config", "Phi3ForCausalLM", WIDTHS | {"pad_token_id": 0}),
    "gemma": ("GemmaConfig", "GemmaForCausalLM",
              WIDTHS | {"head_dim": 16, "hidden_activation": "gelu_pytorch_tanh"}),
    "gpt2": ("GPT2Config", "GPT2LMHeadModel", {"n_embd": 64, "n_layer": 2, "n_head": 4,
             "n_positions": 64, "vocab_size": 256}),
    "bert": ("BertConfig", "BertModel", {"hidden_size": 64, "num_hidden_layers": 2,
             "num_attention_heads": 4, "intermediate_size": 128,
             "max_position_embeddings": 64, "vocab_size": 256}),
}  # fmt: skip


def build(family: str, seed: int = 0, init: float | None = None) -> tuple:
    """A tiny bf16 model with random weights and its token ids. `init`: the weights' std, for
    activations of the size a trained model has (the default 0.02 keeps every gate and
    attention score near 0, where many wrong kernels agree with the right one)."""
    shield_kernels_name()
    cfg_name, model_name, kwargs = FAMILIES[family]
    extra = {"initializer_range": init} if init else {}
    config = getattr(transformers, cfg_name)(**kwargs, **extra, use_cache=False)
    config._attn_implementation = "sdpa"
    torch.manual_seed(seed)
    model = getattr(transformers, model_name)(config).to(torch.bfloat16).eval()
    if init:  # Gemma's norms scale by 1 + w, w zero when fresh: give them a trained spread
        gen = torch.Generator().manual_seed(seed)
        for name, p in model.named_parameters():
            if "norm" in name:
                p.data.copy_(0.3 * torch.randn(p.shape, generator=gen))
    ids = torch.randint(0, 256, (2, 16), generator=torch.Generator().manual_seed(seed + 100))
    return model, [ids]


def starters(edits: dict[str, str] | None = None, tmp: Path | None = None) -> list[LoadedKernel]:
    """Every shipped Triton starter; `edits` appends code to a type's file (a planted bug)."""
    out = []
    for path in sorted(KERNELS.glob("*.py")):
        if path.stem == "__init__":
            continue
        if edits and path.stem in edits:
            assert tmp is not None
            planted = tmp / path.name
            planted.write_text(path.read_text() + "\n" + edits[path.stem])
            path = planted
        out.append(load_kernel(path, path.stem))
    return out


def judged_by_eager_alone(monkeypatch: pytest.MonkeyPatch) -> None:
    """verify as it was before the reference: no float32 forward."""
    monkeypatch.setattr(verifier, "reference_outputs", lambda *a: (None, None))


@pytest.fixture
def gelu_taken_for_swiglu() -> Iterator[None]:
    """The matcher bug the probe fixed: any gate/up/down MLP claimed for fused_mlp, unprobed."""
    side = mlp_model.FUSED_MLP_MODEL.module
    saved = side.claim
    claim = lambda m, probe: "" if mlp_model.mlp_linears(m) else None
    object.__setattr__(side, "claim", claim)
    yield
    object.__setattr__(side, "claim", saved)


FAST = ("gpt2", "llama")  # the others (2-10 s each under the interpreter) run with the slow ones


SLOW = pytest.mark.slow


@pytest.mark.parametrize(
    "family", [f if f in FAST else pytest.param(f, marks=SLOW) for f in sorted(FAMILIES)]
)
def test_right_starters_pass_in_bf16_and_the_model_comes_back_bit_for_bit(family):
    model, inputs = build(family, seed=1)
    before = snapshot(model)
    result = verify_model(model, inputs, starters(), timing=False)
    assert_same(model, before)
    assert result.outputs_match, result.outputs
    for o in result.outputs:
        assert o.rule == REFERENCE and o.margin > 1.2, o  # measured: at least 1.6x


def test_silu_for_gemmas_gelu_fails_where_the_eager_rule_passed(gelu_taken_for_swiglu, monkeypatch):
    model, inputs = build("gemma", seed=0, init=0.1)
    result = verify_model(model, inputs, starters(), timing=False)
    assert result.calls["fused_mlp"]["kernel"] == 2
    logits, = result.outputs  # fmt: skip
    assert logits.rule == REFERENCE and not logits.ok
    assert logits.error > 3 * REFERENCE_FACTOR * logits.eager_error  # measured: 18.5x eager's
    judged_by_eager_alone(monkeypatch)
    assert verify_model(model, inputs, starters(), timing=False).outputs_match


def test_layernorm_eps_ten_times_too_large_fails_in_gpt2(tmp_path, monkeypatch):
    planted = ("_right = kernel_fn\n\n\ndef kernel_fn(x, weight, bias, eps=1e-5):\n"
               "    return _right(x, weight, bias, eps * 10)\n")  # fmt: skip
    model, inputs = build("gpt2", seed=0)
    kernels = starters({"layernorm": planted}, tmp_path)
    result = verify_model(model, inputs, kernels, timing=False)
    logits, = result.outputs  # fmt: skip
    assert logits.rule == REFERENCE and not logits.ok
    assert logits.error > 2 * REFERENCE_FACTOR * logits.eager_error  # measured: 10.4x eager's
    judged_by_eager_alone(monkeypatch)
    assert verify_model(model, inputs, kernels, timing=False).outputs_match
