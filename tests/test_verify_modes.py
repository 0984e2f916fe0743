"""Every mode a user could run the model in, timed side by side, and the custom ops under
torch.compile without graph breaks."""

from __future__ import annotations

import shutil

import pytest
import torch
from torch import nn
from verify_helpers import Tiny, starters, tiny_inputs, workspace_with

from autokernel.model.verify.modes import Variant, graph_breaks, shared_copy, summarize, time_modes
from autokernel.model.verify.verifier import collect_kernels, verify_model


@pytest.mark.slow
def test_a_variant_shares_the_parameters_and_leaves_the_model_unpatched(tmp_path):
    model = Tiny(layers=1).eval()
    kernels, _, _ = collect_kernels(workspace_with(tmp_path, starters("rmsnorm", "matmul")))
    v = Variant(model, tiny_inputs(), kernels)
    try:
        assert v.model is not model
        assert v.model.head.weight is model.head.weight  # no copy of the weights
        assert "forward" in vars(v.model.head) and "forward" not in vars(model.head)
        with torch.no_grad():
            want = model(*tiny_inputs())
        got = v()
        assert v.patch is not None and v.patch.counts()["matmul"]["kernel"] > 0
        torch.testing.assert_close(got[0], want[0], rtol=1e-4, atol=1e-4)
    finally:
        v.close()
    copy = shared_copy(model)
    assert copy.cos is model.cos  # buffers shared too


def test_modes_are_timed_interleaved_and_a_failing_mode_is_reported():
    order: list[str] = []

    def runner(name: str, fail: bool = False):
        def fn():
            if fail:
                raise RuntimeError("cannot capture\nsecond line")
            return name

        fn.name = name  # type: ignore[attr-defined]
        return fn

    modes = {
        "eager": runner("eager"),
        "patched": runner("patched"),
        "cuda-graphs": runner("g", True),
    }

    def timer(fn, on_gpu):
        order.append(fn.name)
        return {"eager": 2.0, "patched": 1.0}[fn.name]

    samples, errors = time_modes(modes, on_gpu=False, rounds=4, timer=timer)
    assert errors == {"cuda-graphs": "RuntimeError: cannot capture"}
    assert samples == {"eager": [2.0] * 4, "patched": [1.0] * 4}
    assert order == ["eager", "patched", "patched", "eager"] * 2  # rotated every round
    t = summarize("patched", [1.0, 1.2, 0.8, 1.0, 1.0], ["rmsnorm"])
    assert t.ms == 1.0 and 0.0 < t.spread < 0.2


class Breaks(nn.Module):
    """Planted: a graph break in the middle of the forward."""

    def forward(self, x):
        x = x * 2
        torch._dynamo.graph_break()
        return x + 1


@pytest.mark.slow
def test_the_custom_ops_compile_without_graph_breaks(tmp_path):
    kinds = ("rmsnorm", "flash_attention", "softmax", "layernorm", "matmul", "cross_entropy")
    kernels, _, _ = collect_kernels(workspace_with(tmp_path, starters(*kinds)))
    plain = Variant(Tiny(layers=1).eval(), tiny_inputs())
    patched = Variant(Tiny(layers=1).eval(), tiny_inputs(), kernels)
    try:
        assert graph_breaks(plain)[0] == 0
        count, reasons = graph_breaks(patched)
        assert count == 0, reasons
        assert patched.patch is not None and patched.patch.counts()["rmsnorm"]["kernel"] > 0
    finally:
        patched.close()
    # the check sees a break where there is one
    count, reasons = graph_breaks(Variant(Breaks(), [torch.ones(3)]))
    assert count == 1 and reasons


@pytest.mark.slow
@pytest.mark.skipif(shutil.which("gcc") is None and shutil.which("cc") is None,
                    reason="torch.compile on the CPU needs a C compiler")  # fmt: skip
def test_verify_times_the_four_modes_and_names_the_best(tmp_path):
    kernels, _, _ = collect_kernels(workspace_with(tmp_path, starters("rmsnorm")))
    torch._dynamo.reset()
    result = verify_model(Tiny(layers=1).eval(), tiny_inputs(), kernels, rounds=1,
                          cuda_graphs=True)  # fmt: skip
    assert set(result.modes) == {"eager", "patched", "compile", "compile+patched"}
    assert all(m["ms"] > 0 for m in result.modes.values())
    assert result.modes["patched"]["kernels"] == ["rmsnorm"]
    assert result.modes["compile"]["kernels"] == []
    assert result.best_mode == min(result.modes, key=lambda m: result.modes[m]["ms"])
    assert result.graph_breaks == {"compile+patched": 0}
    assert any(n.startswith("cuda-graphs: could not run: CudaGraphError") for n in result.notes)
    for mode in ("cuda-graphs+patched", "compile+cuda-graphs", "compile+cuda-graphs+patched"):
        assert any(n.startswith(f"{mode}: could not run: CudaGraphError") for n in result.notes)
    assert result.compile_ms == result.modes["compile"]["ms"]


@pytest.mark.gpu
def test_on_a_gpu_the_selection_runs_and_cuda_graphs_are_timed(tmp_path):
    kernels, _, _ = collect_kernels(workspace_with(tmp_path, starters("rmsnorm", "softmax")))
    model = Tiny(layers=1).eval().cuda()
    inputs = [x.cuda() for x in tiny_inputs()]
    result = verify_model(model, inputs, kernels, mode="eager", with_compile=False,
                          cuda_graphs=True, rounds=3)  # fmt: skip
    assert result.selection is not None and result.selection["mode"] == "eager"
    assert {"eager", "patched", "cuda-graphs"} <= set(result.modes)
    assert "compile+cuda-graphs" not in result.modes  # with_compile=False
    assert result.modes["cuda-graphs"]["kernels"] == []
    assert result.modes["patched"]["kernels"] == result.kept["eager"]
    assert result.best_mode in result.modes


@pytest.mark.gpu
def test_on_a_gpu_the_compiled_patched_forward_is_timed_as_a_cuda_graph(tmp_path):
    from autokernel.model.verify.cuda_graphs import GraphedForward

    kernels, _, _ = collect_kernels(workspace_with(tmp_path, starters("rmsnorm")))
    model = Tiny(layers=1).eval().cuda()
    inputs = [x.cuda() for x in tiny_inputs()]
    torch._dynamo.reset()
    result = verify_model(model, inputs, kernels, mode="compile", cuda_graphs=True, rounds=2)
    assert result.modes["compile+cuda-graphs"]["ms"] > 0
    assert result.modes["compile+cuda-graphs"]["kernels"] == []  # the plain capture
    if result.kept["compile"]:
        patched = result.modes["compile+cuda-graphs+patched"]
        assert patched["ms"] > 0 and patched["kernels"] in ([], result.kept["compile"])
    with torch.no_grad():
        want = model(*inputs)
        got = GraphedForward(torch.compile(model))(*inputs)
    torch.testing.assert_close(got, want, rtol=2e-2, atol=2e-2)


@pytest.mark.slow
@pytest.mark.skipif(shutil.which("gcc") is None and shutil.which("cc") is None,
                    reason="torch.compile on the CPU needs a C compiler")  # fmt: skip
def test_the_compiled_patched_forward_compiles_once(tmp_path):
    # A counter read inside the traced wrappers made Dynamo guard on its value: every call
    # recompiled, and compile+patched read hundreds of times slower than compile.
    from torch._dynamo.utils import counters

    from autokernel.model.verify.modes import recompile_limit

    kernels, _, _ = collect_kernels(workspace_with(tmp_path, starters("softmax", "reduce")))
    torch._dynamo.reset()
    with recompile_limit():
        v = Variant(Tiny(layers=1).eval(), tiny_inputs(), kernels, compiled=True)
        try:
            v()
            graphs = counters["stats"]["unique_graphs"]
            for _ in range(3):
                v()
            assert counters["stats"]["unique_graphs"] == graphs
            assert v.patch is not None and v.patch.counts()["softmax"]["kernel"] >= 4
        finally:
            v.close()
