"""The examples build, run a CPU float32 forward quickly, and compute what they claim to."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest
import torch

from autokernel import reference

EXAMPLES = Path(__file__).resolve().parents[1] / "examples"


def load(name: str):
    spec = importlib.util.spec_from_file_location(f"example_{name}", EXAMPLES / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.slow
@pytest.mark.parametrize(
    ("name", "out_shape"),
    [
        ("gpt2_style", lambda m: (m.BATCH, m.SEQ, m.VOCAB)),
        ("llama_style", lambda m: (m.BATCH, m.SEQ, m.VOCAB)),
        ("bert_style", lambda m: (m.BATCH, m.CLASSES)),
        ("single_op", lambda m: (m.ROWS, m.COLS)),
    ],
)
def test_example_runs(name, out_shape):
    m = load(name)
    model = m.Model(*m.get_init_inputs()).eval()
    inputs = m.get_inputs()
    with torch.no_grad():
        y = model(*inputs)
    assert tuple(y.shape) == out_shape(m)
    assert y.dtype == torch.float32 and torch.isfinite(y).all()
    for x in inputs:  # token ids must index the embedding
        if not x.is_floating_point():
            assert 0 <= int(x.min()) and int(x.max()) < m.VOCAB


@pytest.mark.parametrize("name", ["gpt2_style", "llama_style", "bert_style"])
def test_examples_are_deterministic(name):
    m = load(name)
    a, b = (m.Model(*m.get_init_inputs()).eval() for _ in range(2))
    with torch.no_grad():
        assert torch.equal(a(*m.get_inputs()), b(*m.get_inputs()))


@pytest.mark.slow
def test_bert_outputs_probabilities():
    m = load("bert_style")
    with torch.no_grad():
        y = m.Model(*m.get_init_inputs()).eval()(*m.get_inputs())
    torch.testing.assert_close(y.sum(-1), torch.ones(m.BATCH))


def test_llama_rotary_matches_reference():
    m = load("llama_style")
    x = torch.randn(2, 3, 16, 8, generator=torch.Generator().manual_seed(1))
    cos, sin = m.rotary_tables(16, 8, torch.float32, torch.device("cpu"))
    torch.testing.assert_close(m.apply_rotary(x, cos, sin), reference.rotary_embedding(x, cos, sin))


def test_llama_rmsnorm_matches_reference_in_bf16():
    m = load("llama_style")
    norm = m.RMSNorm(64)
    with torch.no_grad():
        norm.weight.uniform_(0.5, 1.5)
    x = torch.randn(5, 64, generator=torch.Generator().manual_seed(2)).bfloat16()
    y = norm(x)
    assert y.dtype == torch.bfloat16
    torch.testing.assert_close(y, reference.rmsnorm(x, norm.weight, norm.eps), atol=0, rtol=0)


def test_llama_mlp_matches_reference():
    m = load("llama_style")
    mlp = m.SwiGLUMLP(32, 48)
    x = torch.randn(4, 32, generator=torch.Generator().manual_seed(3))
    with torch.no_grad():
        want = reference.fused_mlp(
            x, mlp.gate_proj.weight, mlp.up_proj.weight, mlp.down_proj.weight
        )
        torch.testing.assert_close(mlp(x), want)


def test_llama_uses_grouped_query_attention():
    m = load("llama_style")
    model = m.Model(*m.get_init_inputs())
    attn = model.layers[0].self_attn
    assert attn.kv_heads < attn.heads
    assert attn.k_proj.out_features == m.KV_HEADS * (m.HIDDEN // m.HEADS)
    assert all(lin.bias is None for lin in model.modules() if isinstance(lin, torch.nn.Linear))


def test_llama_gpu_size_is_selected_by_the_environment(monkeypatch):
    monkeypatch.setenv("AUTOKERNEL_EXAMPLE_SIZE", "gpu")
    m = load("llama_style")
    assert (m.HIDDEN // m.HEADS, m.BATCH * m.SEQ, m.VOCAB) == (128, 8192, 32000)
    assert m.get_init_inputs()[:2] == [32000, 2048]
    monkeypatch.setenv("AUTOKERNEL_EXAMPLE_SIZE", "huge")
    with pytest.raises(ValueError, match="use one of small, gpu"):
        load("llama_style")
