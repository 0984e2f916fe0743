"""verify, patching and the custom ops on the CPU: the nine starters put into a tiny LLaMA-style
model under the Triton interpreter (float32: the interpreter's bf16 arithmetic is wrong). The
workspace, the Python API and the command are in test_verify_workspace.py."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F
from torch import nn
from torch._subclasses.fake_tensor import FakeTensorMode
from verify_helpers import (
    KERNELS,
    MLP,
    RMSNorm,
    Tiny,
    broken_rmsnorm,
    starters,
    tiny_inputs,
    workspace_with,
)

from autokernel import api, reference
from autokernel.model import kernel_ops
from autokernel.model.kernel_ops import load_kernel
from autokernel.model.patching import Patch
from autokernel.model.verify.verifier import collect_kernels, verify_model
from autokernel.specs import SPECS

# --- the whole model ---------------------------------------------------------------------------


@pytest.mark.slow
def test_nine_starters_match_eager_and_every_replacement_runs(tmp_path):
    kernels, _, notes = collect_kernels(workspace_with(tmp_path, starters()))
    assert sorted(k.kernel_type for k in kernels) == sorted(SPECS) and not notes
    result = verify_model(Tiny().eval(), tiny_inputs(), kernels, timing=False)
    assert result.outputs_match, result.outputs
    assert not result.errors, result.errors
    assert result.ok
    for kind in SPECS:
        assert result.calls[kind]["kernel"] > 0, (kind, result.calls[kind])
    # 2 blocks: 4 RMSNorms, 4 rotary calls (q and k), 2 attentions, 2 MLPs; 8 + 1 Linears
    # outside the MLPs (the MLPs' own Linears belong to fused_mlp).
    expected = {"rmsnorm": 4, "rotary_embedding": 4, "flash_attention": 2, "fused_mlp": 2,
                "matmul": 9, "layernorm": 1, "softmax": 1, "cross_entropy": 1,
                "reduce": 1}  # fmt: skip
    assert {k: c["kernel"] for k, c in result.calls.items()} == expected
    assert all(c["fallback"] == 0 for c in result.calls.values())
    assert len(result.outputs) == 3 and all(o.error < 1e-5 for o in result.outputs)


def test_wrong_kernel_is_reported_as_a_mismatch(tmp_path, monkeypatch):
    monkeypatch.setenv("AUTOKERNEL_TRUST_UNJUDGED", "1")  # a hand-broken kernel no run judged
    kernels, _, _ = collect_kernels(workspace_with(tmp_path, {"rmsnorm": broken_rmsnorm()}))
    result = verify_model(Tiny().eval(), tiny_inputs(), kernels, timing=False)
    assert result.calls["rmsnorm"]["kernel"] == 4
    assert not result.outputs_match and not result.ok
    assert max(o.error for o in result.outputs) > 10 * result.outputs[0].tolerance


def test_replacement_that_never_matches_is_an_error(tmp_path):
    # layernorm: the model without its head has no LayerNorm at all; matmul with policy "plan"
    # at shapes the model never uses: every call falls back.
    model = Tiny().eval()
    ks = [
        load_kernel(KERNELS / "layernorm.py"),
        load_kernel(KERNELS / "matmul.py", shapes=[{"M": 4096, "N": 4096, "K": 4096}]),
    ]
    block = model.blocks[0]
    x = torch.randn(1, 8, 32)
    result = verify_model(block, [x, model.cos, model.sin], ks, policy="plan", timing=False)
    assert result.outputs_match and not result.ok
    errors = "\n".join(result.errors)
    assert "layernorm: never called: nothing in the model matched (nn.LayerNorm" in errors
    assert "matmul: never called: all 7 calls fell back: shape 8x" in errors
    assert "not in the plan" in errors


@pytest.mark.parametrize("traced", [False, True], ids=["swapped-callees", "function-mode"])
def test_calls_outside_the_contract_fall_back_and_tensor_methods_are_routed(traced):
    """The matcher claims only calls of the type's semantics (softmax over the last dim, a
    default cross-entropy, a sum over the last dim; tensor methods included, as profile found
    them); a claimed call outside the kernel's contract (float64) falls back and is counted;
    softmax over dim 0 or a full sum is another op, left to PyTorch (or a generic target).
    Eager forwards route by swapped callees, traced ones by a TorchFunctionMode: alike."""
    patch = Patch(
        [load_kernel(KERNELS / f"{n}.py") for n in ("softmax", "cross_entropy", "reduce")]
    )

    class Calls(nn.Module):
        def forward(self, x, t):
            return (F.softmax(x, dim=0), F.softmax(x.double(), dim=-1), F.softmax(x, dim=-1),
                    F.cross_entropy(x, t, reduction="sum"), torch.sum(x, dim=-1, keepdim=True),
                    x.softmax(-1), x.sum(-1), torch.sum(x))  # fmt: skip

    model = Calls()
    x, t = torch.randn(3, 5), torch.tensor([0, 4, -100])
    originals = (F.softmax, torch.softmax, F.cross_entropy, torch.sum)
    want = (torch.softmax(x, 0), reference.softmax(x.double()), reference.softmax(x),
            F.cross_entropy(x, t, reduction="sum"), x.sum(-1, keepdim=True), reference.softmax(x),
            x.sum(-1))  # fmt: skip
    try:
        with patch.applied(model, traced=traced), torch.no_grad():
            got = model(x, t)
    finally:
        patch.close()
    assert (F.softmax, torch.softmax, F.cross_entropy, torch.sum) == originals
    for g, w in zip(got[:7], want, strict=True):
        torch.testing.assert_close(g, w)
    assert got[7] == x.sum()
    c = patch.counts()
    assert c["softmax"]["kernel"] == 2 and c["softmax"]["sites"] == 3
    assert c["softmax"]["fallback_reasons"] == {"dtype float64": 1}
    assert c["cross_entropy"]["sites"] == 0 and c["cross_entropy"]["kernel"] == 0
    assert c["reduce"]["kernel"] == 2 and c["reduce"]["fallback"] == 0 and c["reduce"]["sites"] == 2


def test_duck_typed_module_that_computes_something_else_is_left_alone():
    class GemmaRMSNorm(RMSNorm):
        def forward(self, x):
            return reference.rmsnorm(x, 1 + self.weight, self.eps)

    class GeluMLP(MLP):
        def forward(self, x):
            return self.down_proj(F.gelu(self.gate_proj(x)) * self.up_proj(x))

    model = nn.Sequential(GemmaRMSNorm(16), GeluMLP(16, 32))
    patch = Patch([load_kernel(KERNELS / "rmsnorm.py"), load_kernel(KERNELS / "fused_mlp.py")])
    try:
        with patch.applied(model):
            pass
    finally:
        patch.close()
    assert sum(patch.sites.values()) == 0
    assert any("0: left alone: does not compute rmsnorm" in n for n in patch.notes), patch.notes
    assert any("1: left alone: does not compute a SwiGLU MLP" in n for n in patch.notes)


# --- the custom ops ----------------------------------------------------------------------------


def op_inputs(kind: str) -> tuple:
    spec = SPECS[kind]
    gen = torch.Generator().manual_seed(0)
    return spec.make_inputs(spec.cpu.smoke, torch.float32, gen, torch.device("cpu"))


@pytest.mark.parametrize("kind", SPECS)
def test_fake_impl_gives_the_reference_shape_and_dtype(kind):
    args = op_inputs(kind)
    want = getattr(reference, kind)(*args)
    with FakeTensorMode() as mode:
        fake = [mode.from_tensor(a) if isinstance(a, torch.Tensor) else a for a in args]
        got = kernel_ops.OPS[kind](*fake, 0)  # no router for slot 0: the fake must not need one
    assert (got.shape, got.dtype) == (want.shape, want.dtype)


def test_ops_pass_opcheck_and_route_to_the_kernel():
    router = kernel_ops.Router("rmsnorm", [load_kernel(KERNELS / "rmsnorm.py")])
    slot = kernel_ops.register(router)
    try:
        x, w, eps = op_inputs("rmsnorm")
        torch.library.opcheck(
            kernel_ops.rmsnorm.op, (x, w, eps, slot), test_utils=("test_schema", "test_faketensor")
        )
        torch.testing.assert_close(
            kernel_ops.rmsnorm(x, w, eps, slot), reference.rmsnorm(x, w, eps)
        )
    finally:
        kernel_ops.unregister(slot)
    assert router.kernel_calls >= 2 and not router.fallbacks


def test_patched_model_traces_under_torch_compile(tmp_path):
    model = Tiny(layers=1).eval()
    inputs = tiny_inputs()
    patch = api.load_kernels(workspace_with(tmp_path, starters("rmsnorm", "flash_attention")))
    try:
        with torch.no_grad():
            want = model(*inputs)
            with api.use_kernels(model, patch):
                compiled = torch.compile(model, backend="aot_eager", fullgraph=True)
                got = compiled(*inputs)
    finally:
        patch.close()
    for g, w in zip(got, want, strict=True):
        torch.testing.assert_close(g, w, rtol=1e-4, atol=1e-4)
    assert patch.counts()["rmsnorm"]["kernel"] == 2
    assert patch.counts()["flash_attention"]["kernel"] == 1
