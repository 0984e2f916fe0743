"""Batched products (torch.bmm, baddbmm, a @ b with batch dims): those with one operand shared
across the batch are matmul targets whose one 2-D call gives exactly what eager gives; those
whose operands both differ per batch stay with PyTorch, and profile and verify say why."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from rich.console import Console

from autokernel import reference
from autokernel.model.kernel_ops import load_kernel
from autokernel.model.loading import ModelSource, load_model
from autokernel.model.matcher import call_note, match_call
from autokernel.model.profiling.profiler import plan_data, run_profile, write_plan
from autokernel.model.verify.verifier import verify_model
from autokernel.targets import from_plan
from autokernel.views.profile import profile_view
from tests.test_matching import kernels_for
from tests.test_profiler import write

ROOT = Path(__file__).resolve().parents[1]
BATCHED = ROOT / "tests" / "data" / "ops" / "batched_products.py"
TOL = {torch.float32: 1e-5, torch.float16: 1e-2, torch.bfloat16: 2e-2}


def _t(*shape: int, dtype: torch.dtype = torch.float32) -> torch.Tensor:
    g = torch.Generator().manual_seed(sum(shape))
    return torch.randn(shape, generator=g).to(dtype)


def _shared(*batch: int, k: int = 8, n: int = 6, dtype: torch.dtype = torch.float32):
    """A (K, N) matrix seen as the same matrix for every batch (expanded: stride 0)."""
    return _t(k, n, dtype=dtype).expand(*batch, k, n)


def _run(match) -> object:
    """The claim run as verify runs it, with the matmul type's oracle as the kernel."""
    return match.finish([reference.matmul(*args) for args in match.calls])


FOLDED = {  # name -> (callee, args in a dtype, kwargs, the one 2-D call's M, N, K)
    "bmm, right expanded": (torch.bmm, lambda d: (_t(4, 5, 8, dtype=d), _shared(4, dtype=d)),
                            {}, (20, 6, 8)),
    "bmm, a batch of 1": (torch.Tensor.bmm, lambda d: (_t(1, 5, 8, dtype=d), _t(1, 8, 6, dtype=d)),
                          {}, (5, 6, 8)),
    "4-D @ (1, K, N)": (torch.matmul, lambda d: (_t(2, 3, 5, 8, dtype=d), _t(1, 8, 6, dtype=d)),
                        {}, (30, 6, 8)),
    "3-D @ (1, 1, K, N) adds dims": (torch.Tensor.__matmul__,
                                     lambda d: (_t(3, 5, 8, dtype=d), _t(1, 1, 8, 6, dtype=d)),
                                     {}, (15, 6, 8)),
    "left shared: (M, K) @ (B, K, N)": (torch.matmul,
                                        lambda d: (_t(5, 8, dtype=d), _t(3, 8, 6, dtype=d)),
                                        {}, (5, 18, 8)),
    "left expanded, right per batch": (torch.matmul, lambda d: (
        _t(5, 8, dtype=d).expand(2, 3, 5, 8), _t(3, 8, 6, dtype=d)), {}, (5, 18, 8)),
    "both shared, broadcast": (torch.matmul, lambda d: (_t(1, 5, 8, dtype=d), _shared(4, dtype=d)),
                               {}, (5, 6, 8)),
    "baddbmm": (torch.baddbmm, lambda d: (
        _t(1, 1, 6, dtype=d), _t(4, 5, 8, dtype=d), _shared(4, dtype=d)), {}, (20, 6, 8)),
    "baddbmm, beta and alpha": (torch.Tensor.baddbmm, lambda d: (
        _t(4, 5, 6, dtype=d), _t(4, 5, 8, dtype=d), _shared(4, dtype=d)),
        {"beta": 0.5, "alpha": -2.0}, (20, 6, 8)),
}  # fmt: skip


@pytest.mark.parametrize("case", FOLDED)
@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16], ids=str)
def test_a_shared_operand_folds_into_one_exact_2d_product(case, dtype):
    func, make, kwargs, (m, n, k) = FOLDED[case]
    args = make(dtype)
    match = match_call(func, args, kwargs)
    assert match is not None and match.kind == "matmul", call_note(func, args, kwargs)
    assert match.shape == {"M": m, "N": n, "K": k}
    assert not match.more  # one launch: the batch is inside the 2-D problem
    got, want = _run(match), func(*args, **kwargs)
    assert got.shape == want.shape and got.dtype == want.dtype
    assert got.is_contiguous()  # as torch returns it: a later .view() works alike
    torch.testing.assert_close(got, want, atol=TOL[dtype], rtol=TOL[dtype])


def test_baddbmm_with_beta_zero_ignores_nan_in_input_as_torch_does():
    nan = torch.full((4, 5, 6), float("nan"))
    args = (nan, _t(4, 5, 8), _shared(4))
    match = match_call(torch.baddbmm, args, {"beta": 0})
    assert match is not None
    torch.testing.assert_close(_run(match), torch.baddbmm(*args, beta=0))


PER_BATCH = {  # both operands differ per batch: G independent products
    "bmm": (torch.bmm, (_t(8, 6, 4), _t(8, 4, 5))),
    "attention scores": (torch.Tensor.__matmul__, (_t(2, 3, 6, 4), _t(2, 3, 6, 4).mT)),
    "broadcast to per-batch": (torch.matmul, (_t(2, 1, 6, 4), _t(1, 3, 4, 5))),
}


@pytest.mark.parametrize("case", PER_BATCH)
def test_per_batch_operands_are_no_target_and_say_why(case):
    func, args = PER_BATCH[case]
    assert match_call(func, args, {}) is None
    why = call_note(func, args, {})
    assert "not a matmul target" in why and "differ per batch" in why


def test_calls_torch_rejects_are_not_claimed():
    """Folding must not make a call torch raises on succeed in the patched model."""
    assert match_call(torch.bmm, (_t(5, 8), _t(8, 6)), {}) is None  # bmm takes 3-D
    assert match_call(torch.mm, (_t(2, 5, 8), _t(8, 6)), {}) is None  # mm takes 2-D
    assert match_call(torch.bmm, (_t(2, 5, 8), _t(3, 8, 6)), {}) is None  # batches differ
    assert "1-D operand" in call_note(torch.matmul, (_t(5, 8), _t(8)), {})


def test_profile_folds_a_shared_bmm_and_explains_a_per_batch_one(tmp_path):
    forward = "(torch.bmm(xs[0], xs[1].expand(4, -1, -1)), torch.bmm(xs[0], xs[2]))"
    inputs = ("[torch.randn(4, 16, 8, generator=g), torch.randn(8, 12, generator=g), "
              "torch.randn(4, 8, 12, generator=g)]")  # fmt: skip
    prof = run_profile(load_model(ModelSource(path=write(tmp_path, forward, inputs))), 1, 1)
    assert [(t.kind, t.shape) for t in prof.targets] == [("matmul", {"M": 64, "N": 12, "K": 8})]
    (bmm,) = [r for r in prof.rows if r.name == "aten::bmm"]
    assert "torch.bmm (4x16x8, 4x8x12): not a matmul target" in bmm.why
    (other,) = [o for o in plan_data(prof)["other"] if o["name"] == "aten::bmm"]
    assert other["why"] == bmm.why
    console = Console(width=200, record=True)
    console.print(profile_view(prof))
    shown = " ".join(console.export_text().split())
    assert "other: aten::bmm" in shown and "differ per batch" in shown


def test_profile_targets_are_what_verify_plugs_in(tmp_path):
    """Every matmul target of the batched products runs its kernel in verify (the oracle as
    kernel), outputs match eager, and verify notes why q @ k^T stayed PyTorch's."""
    loaded = load_model(ModelSource(path=BATCHED))
    plan = tmp_path / "plan.yaml"
    write_plan(run_profile(loaded, iters=1, warmup=1), plan)
    planned = [t for t in from_plan(plan) if t.kernel_type == "matmul"]
    assert sorted(tuple(t.shapes[0].values()) for t in planned) == [
        (12, 128, 16), (60, 24, 8), (64, 48, 32)]  # fmt: skip
    kernels = kernels_for(plan)
    result = verify_model(loaded.model, loaded.inputs, kernels, timing=False, policy="plan")
    assert not result.errors and result.outputs_match, (result.errors, result.outputs)
    assert result.calls["matmul"]["kernel"] == 4 and result.calls["matmul"]["fallback"] == 0
    assert {k for k, n in result.calls["matmul"]["by_kernel"].items() if n} == {
        t.name for t in planned}  # fmt: skip
    assert any("Tensor.matmul (2x3x10x8, 2x3x8x10): left to PyTorch" in n for n in result.notes)


def test_the_triton_starter_computes_the_folded_products():
    """The shipped matmul starter, unchanged, plugged into the batched products (interpreter)."""
    loaded = load_model(ModelSource(path=BATCHED))
    kernel = load_kernel(ROOT / "kernels" / "matmul.py", "matmul")
    result = verify_model(loaded.model, loaded.inputs, [kernel], timing=False)
    assert not result.errors and result.outputs_match, result.outputs
    assert result.calls["matmul"]["kernel"] == 4
