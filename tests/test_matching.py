"""profile and verify decide with one matcher: every target a plan holds is one verify plugs
in, on every example and test model (each target's kernel here is its exact reference, so what
is tested is where kernels go, not what they compute)."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from autokernel import reference
from autokernel.model.kernel_ops import LoadedKernel
from autokernel.model.loading import ModelSource, load_model
from autokernel.model.profiling.profiler import run_profile, write_plan
from autokernel.model.verify.verifier import verify_model
from autokernel.specs import GENERIC
from autokernel.specs.region import Region
from autokernel.targets import from_plan

ROOT = Path(__file__).resolve().parents[1]
OPS = ROOT / "tests" / "data" / "ops"
EXAMPLES = ("llama_style", "gpt2_style", "bert_style", "single_op")
MODELS = [ROOT / "examples" / f"{n}.py" for n in EXAMPLES] + sorted(OPS.glob("*.py"))


def kernels_for(plan: Path) -> list[LoadedKernel]:
    out = []
    for t in from_plan(plan):
        if t.kernel_type == GENERIC:
            region = Region.from_dict(t.region)

            def fn(*xs, r=region):
                return r.replay(xs)

            out.append(LoadedKernel(t.name, GENERIC, fn, plan, t.shapes, region, t.route))
        else:
            out.append(LoadedKernel(t.name, t.kernel_type, getattr(reference, t.kernel_type),
                                    plan, t.shapes))  # fmt: skip
    return out


@pytest.mark.slow
@pytest.mark.parametrize("path", MODELS, ids=lambda p: p.stem)
def test_every_planned_target_is_plugged_in_by_verify(path, tmp_path):
    loaded = load_model(ModelSource(path=path))
    prof = run_profile(loaded, iters=1, warmup=1)
    plan = tmp_path / "plan.yaml"
    write_plan(prof, plan)
    kernels = kernels_for(plan)
    result = verify_model(loaded.model, loaded.inputs, kernels, timing=False)
    assert not result.errors, result.errors
    assert result.outputs_match, result.outputs
    for k in kernels:
        key = k.name if k.kernel_type == GENERIC else k.kernel_type
        assert result.calls[key]["kernel"] > 0, (k.name, result.calls[key])


@pytest.mark.slow
def test_the_test_models_targets_are_plugged_in(tmp_path):
    """test_verify's tiny model with all nine types, and test_profiler's modules recognized by
    what they compute (an unnamed RMSNorm, a GELU MLP named like SwiGLU, a scale with eps)."""
    from autokernel.model.loading import LoadedModel
    from tests.test_profiler import MODULES
    from tests.verify_helpers import Tiny, tiny_inputs

    path = tmp_path / "modules.py"
    path.write_text(MODULES)
    models = [LoadedModel(Tiny().eval(), tiny_inputs(), torch.float32, torch.device("cpu"),
                          "tiny"), load_model(ModelSource(path=path))]  # fmt: skip
    for loaded in models:
        plan = tmp_path / f"{loaded.name}.yaml"
        write_plan(run_profile(loaded, iters=1, warmup=1), plan)
        kernels = kernels_for(plan)
        result = verify_model(loaded.model, loaded.inputs, kernels, timing=False)
        assert not result.errors and result.outputs_match, (loaded.name, result.errors)
        assert len({k.kernel_type for k in kernels}) >= 2
        for k in kernels:
            key = k.name if k.kernel_type == GENERIC else k.kernel_type
            assert result.calls[key]["kernel"] > 0, (loaded.name, k.name)


EXPECTED = {  # model -> the kernel types / generic targets (named for the call) it must plan
    "softmax_method": {"softmax"},
    "sum_method": {"reduce"},
    "meta_mlp": {"rmsnorm", "fused_mlp"},
    "log_softmax": {"log_softmax"},
    "sum_middle": {"sum"},
    "gelu_tanh": {"gelu"},
    "rmsnorm_channels": {"Model"},  # five ops in the model's forward: one region
    "silu_mul": {"Model"},
    "add_layernorm": {"Model"},  # the residual add and the norm in one region
    "new_gelu_module": {"Model"},  # the outermost region: the model around the activation
    "hf_rotary": {"apply_rotary_pos_emb"},  # a function region (its tables are per batch)
    "hub_rotary": {"apply_rotary_pos_emb"},  # the same function inside a module object
    "batched_products": {"matmul", "softmax"},  # bmm/baddbmm/@ with a shared operand folded
}


@pytest.mark.slow
@pytest.mark.parametrize("name", EXPECTED)
def test_single_op_files_become_the_expected_targets(name, tmp_path, monkeypatch):
    # recognition, not the share policy: a CPU's timings of tiny ops are noise
    monkeypatch.setattr("autokernel.model.profiling.regions.GENERIC_MIN_SHARE", 0.0)
    loaded = load_model(ModelSource(path=OPS / f"{name}.py"))
    prof = run_profile(loaded, iters=1, warmup=1)
    plan = tmp_path / "plan.yaml"
    write_plan(prof, plan)
    got = {t.name if t.kernel_type == GENERIC else t.kernel_type for t in from_plan(plan)}
    assert EXPECTED[name] <= got, (got, prof.notes)


def test_tensor_methods_and_functions_are_claimed_alike():
    """x.softmax(-1), torch.softmax and F.softmax are one softmax to the matcher."""
    from autokernel.model.matcher import match_call

    x = torch.randn(4, 8)
    for func, args in ((torch.Tensor.softmax, (x, -1)), (torch.softmax, (x, -1)),
                       (torch.nn.functional.softmax, (x,))):  # fmt: skip
        kwargs = {"dim": -1} if func is torch.nn.functional.softmax else {}
        m = match_call(func, args, kwargs)
        assert m is not None and m.kind == "softmax" and m.shape == {"rows": 4, "cols": 8}
    assert match_call(torch.Tensor.softmax, (x, 0), {}) is None  # another op: generic


@pytest.mark.slow
@pytest.mark.parametrize("name", ["log_softmax", "rmsnorm_channels", "hf_rotary", "hub_rotary"])
def test_generic_kernels_plug_in_under_torch_compile(name, tmp_path, monkeypatch):
    """A call, a module region and a function region with two outputs: the patched model
    traces as one graph (the generic op is one node) and computes what the model does."""
    from autokernel.model.patching import Patch

    monkeypatch.setattr("autokernel.model.profiling.regions.GENERIC_MIN_SHARE", 0.0)
    loaded = load_model(ModelSource(path=OPS / f"{name}.py"))
    plan = tmp_path / "plan.yaml"
    write_plan(run_profile(loaded, iters=1, warmup=1), plan)
    patch = Patch([k for k in kernels_for(plan) if k.kernel_type == GENERIC])
    try:
        with torch.no_grad():
            want = loaded.model(*loaded.inputs)
            with patch.applied(loaded.model):
                compiled = torch.compile(loaded.model, backend="aot_eager", fullgraph=True)
                got = compiled(*loaded.inputs)
    finally:
        patch.close()
    assert sum(c["kernel"] for c in patch.counts().values()) >= 1
    for g, w in zip(got if isinstance(got, tuple) else (got,),
                    want if isinstance(want, tuple) else (want,), strict=True):  # fmt: skip
        torch.testing.assert_close(g, w)


def _two(x, y):
    return x + y


def _rotate(q, k, cos, sin, unsqueeze_dim=1):
    return q, k


def test_only_functions_that_could_be_rotary_get_wrapped():
    """Verify wraps a model function (a frame and a match per call) only where a type could
    claim it: rotary needs x, cos, sin or q, k, cos, sin positionally."""
    from autokernel.model.matcher import function_kinds

    assert "rotary_embedding" in function_kinds(_rotate)
    assert "rotary_embedding" not in function_kinds(_two)
    assert "rotary_embedding" in function_kinds()
