"""verify's float32 reference for a bf16/fp16 model: the in-place cast and its exact restore,
the rule that judges patched by eager's own rounding noise, and the fallback when no reference
can be made. The measurements behind the rule are in docs/verify-tolerance.md."""

from __future__ import annotations

import pytest
import torch
from rich.console import Console
from torch import nn
from verify_helpers import KERNELS, Tiny, tiny_inputs

from autokernel.model.kernel_ops import load_kernel
from autokernel.model.verify import upcast as upcast_mod
from autokernel.model.verify.outputs import (
    EAGER,
    REFERENCE,
    REFERENCE_FACTOR,
    compare,
)
from autokernel.model.verify.upcast import UpcastError, inputs_up, upcast
from autokernel.model.verify.verifier import verify_model
from autokernel.views.verify import render


def snapshot(model: nn.Module) -> dict[str, torch.Tensor]:
    """Every parameter and buffer, cloned: values and dtypes to compare bit for bit."""
    named = [*model.named_parameters(remove_duplicate=False), *model.named_buffers()]
    return {n: t.detach().clone() for n, t in named}


def assert_same(model: nn.Module, before: dict[str, torch.Tensor]) -> None:
    after = snapshot(model)
    assert after.keys() == before.keys()
    for n, t in before.items():
        a = after[n]
        assert a.dtype == t.dtype, n
        assert torch.equal(a.reshape(-1).view(torch.uint8), t.reshape(-1).view(torch.uint8)), n


class Mixed(nn.Module):
    """bf16 weights, a tied head, a float32 buffer that must stay float32 and an int one."""

    def __init__(self) -> None:
        super().__init__()
        torch.manual_seed(0)
        self.embed = nn.Embedding(16, 8).bfloat16()
        self.lin = nn.Linear(8, 8).bfloat16()
        self.head = nn.Linear(8, 16, bias=False).bfloat16()
        self.head.weight = self.embed.weight  # tied
        self.register_buffer("table", torch.randn(8))  # float32 on purpose
        self.register_buffer("steps", torch.arange(3))
        self.seen: list[torch.dtype] = []

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        self.seen = [self.lin.weight.dtype, self.table.dtype, self.head.weight.dtype]
        x = self.embed(ids)
        return self.head(self.lin(x) + self.table.to(x.dtype))


# --- the in-place cast -------------------------------------------------------------------------


def test_upcast_casts_half_precision_only_and_restores_bit_for_bit():
    m = Mixed()
    before, weight = snapshot(m), m.lin.weight
    with torch.no_grad(), upcast(m):
        m(torch.arange(4))
    assert m.seen == [torch.float32, torch.float32, torch.float32]
    assert m.lin.weight is weight and m.head.weight is m.embed.weight  # same objects, tie kept
    assert_same(m, before)


def test_upcast_restores_when_the_forward_raises():
    m = Mixed()
    before = snapshot(m)
    with pytest.raises(RuntimeError, match="boom"), upcast(m):
        raise RuntimeError("boom")
    assert_same(m, before)


def test_tensors_sharing_storage_are_refused_untouched():
    m = Mixed()
    m.lin.bias = nn.Parameter(m.lin.weight.data[0])  # a view of the weight
    before = snapshot(m)
    with pytest.raises(UpcastError, match="share storage"), upcast(m):
        pass
    assert_same(m, before)


def test_float_inputs_go_up_and_token_ids_stay():
    ids, x = torch.arange(3), torch.ones(2, dtype=torch.bfloat16)
    up = inputs_up([ids, {"x": x}, (x, 1)])
    assert up[0] is ids and up[1]["x"].dtype == torch.float32 and up[2][0].dtype == torch.float32
    assert up[2][1] == 1


# --- the rule ----------------------------------------------------------------------------------


def test_an_error_beyond_eager_noise_fails_the_reference_rule_not_the_eager_one():
    gen = torch.Generator().manual_seed(0)
    exact = torch.randn(64, 64, generator=gen)
    eager = exact.bfloat16()  # one rounding: eager's own noise
    right = (exact * (1 + 1e-3 * torch.randn(64, 64, generator=gen))).bfloat16()
    wrong = (exact * 1.03).bfloat16()  # 3 %: inside the eager rule's 10 % of scale
    ok, = compare(eager, right, torch.bfloat16, 5.0, exact)  # fmt: skip
    bad, = compare(eager, wrong, torch.bfloat16, 5.0, exact)  # fmt: skip
    assert ok.ok and ok.rule == REFERENCE and ok.margin > 1
    assert not bad.ok and bad.rule == REFERENCE and bad.margin < 1
    assert bad.tolerance == max(REFERENCE_FACTOR * bad.eager_error, 2**-7)  # bf16's epsilon
    old, = compare(eager, wrong, torch.bfloat16, 5.0)  # fmt: skip
    assert old.ok and old.rule == EAGER and old.eager_error is None


def test_an_output_eager_gets_exact_may_still_differ_by_one_rounding():
    exact = torch.tensor([1.0, 2.0, 0.5])
    nudged = (exact * (1 + 2**-9)).bfloat16()  # one bf16 rounding off, eager is exact
    check, = compare(exact.bfloat16(), nudged, torch.bfloat16, 5.0, exact)  # fmt: skip
    assert check.eager_error == 0 and check.ok and check.tolerance == 2**-7


def test_one_element_far_off_still_fails_by_the_eager_rule():
    exact = torch.randn(256, 256, generator=torch.Generator().manual_seed(0))
    eager = exact.bfloat16()
    spike = eager.clone()
    spike[0, 0] += 4 * exact.abs().max()  # normwise small over 65536 elements, but far off
    check, = compare(eager, spike, torch.bfloat16, 5.0, exact)  # fmt: skip
    assert not check.ok and check.rule == EAGER


# --- verify on a model -------------------------------------------------------------------------


def softmax_kernel() -> list:
    return [load_kernel(KERNELS / "softmax.py")]


def test_a_float32_model_keeps_the_eager_rule():
    result = verify_model(Tiny().eval(), tiny_inputs(), softmax_kernel(), timing=False)
    assert result.ok and {o.rule for o in result.outputs} == {EAGER}


def test_a_bf16_model_is_judged_by_the_reference_and_comes_back_bit_for_bit():
    model = Tiny().eval().bfloat16()
    before = snapshot(model)
    assert model.cos.dtype == torch.bfloat16
    result = verify_model(model, tiny_inputs(), softmax_kernel(), timing=False)
    assert_same(model, before)
    assert result.ok, result.outputs
    probs = result.outputs[0]
    assert probs.rule == REFERENCE and probs.eager_error > 0 and probs.margin > 1
    data = result.to_json()["outputs"][0]
    assert data["rule"] == REFERENCE and data["margin"] == probs.margin
    console = Console(record=True, width=200)
    render(result, console)
    text = console.export_text()
    assert "fp32-reference" in text and "margin" in text


@pytest.mark.parametrize("where", ["cast", "forward"])
def test_no_reference_falls_back_to_the_eager_rule_and_says_so(monkeypatch, where):
    model = Tiny().eval().bfloat16()
    before = snapshot(model)
    if where == "cast":

        def no_room(m, dtype=torch.float32):
            raise UpcastError("out of memory casting the model to torch.float32: test")

        monkeypatch.setattr(upcast_mod, "upcast", no_room)
    else:
        forward = Tiny.forward

        def oom_in_float32(self, *args):
            if self.head.weight.dtype == torch.float32:
                raise torch.OutOfMemoryError("test")
            return forward(self, *args)

        monkeypatch.setattr(Tiny, "forward", oom_in_float32)
    result = verify_model(model, tiny_inputs(), softmax_kernel(), timing=False)
    assert_same(model, before)
    assert result.ok and {o.rule for o in result.outputs} == {EAGER}
    assert any("no float32 reference" in n and "old, looser rule" in n for n in result.notes)
