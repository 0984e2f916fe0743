"""plan.yaml with what torch.compile makes of the model: per-target figures, how each was found,
a round trip through from_plan, and old plans without them still loading."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from autokernel.model.loading import ModelSource, load_model
from autokernel.model.profiling.attribution import Instance
from autokernel.model.profiling.compiled import (
    BY_NAMES,
    BY_RATIO,
    CompiledFigures,
    group_compiled,
    kind_of_kernel,
    target_compile_ms,
)
from autokernel.model.profiling.profiler import plan_data, run_profile, write_plan
from autokernel.targets import from_plan

EXAMPLES = Path(__file__).resolve().parents[1] / "examples"


@pytest.mark.parametrize(
    "name,kind",
    [
        ("triton_per_fused__softmax_0", "softmax"),
        ("triton_red_fused__to_copy_add_mean_mul_pow_rsqrt_1", "rmsnorm"),
        ("triton_per_fused_native_layer_norm_2", "layernorm"),
        ("triton_poi_fused_mul_silu_3 (outside aten ops)", None),
        ("pytorch_flash::flash_fwd_kernel", "flash_attention"),
    ],
)
def test_inductor_kernel_names_say_the_type(name, kind):
    assert kind_of_kernel(name) == kind


def _figures(by_kind, eager_total_ms: float = 1.6) -> CompiledFigures:
    """Compile halves the profiled forward."""
    return CompiledFigures(eager_forward_ms=2.0, compile_forward_ms=1.0,
                           eager_total_ms=eager_total_ms, compile_total_ms=eager_total_ms / 2,
                           by_kind=by_kind)  # fmt: skip


def test_each_target_gets_its_compiled_time_or_the_ratio():
    mm = {"M": 64, "N": 32, "K": 16}
    instances = [
        Instance("matmul", "aten::mm", mm, us=300.0),
        Instance("matmul", "aten::mm", {"M": 1, "N": 2, "K": 3}, us=900.0),
        Instance("other", "triton_per_fused__softmax_0 (outside aten ops)", us=150.0),
        Instance("other", "triton_red_fused_add_mean_pow_rsqrt_1 (outside aten ops)", us=60.0),
        Instance("other", "triton_poi_fused_mul_silu_2 (outside aten ops)", us=90.0),
    ]
    figures = _figures(group_compiled(instances, iterations=3))
    rows = [("matmul", mm, 0.4), ("softmax", {"rows": 8, "cols": 8}, 0.2),
            ("rmsnorm", {"rows": 8, "cols": 8}, 0.1), ("rmsnorm", {"rows": 8, "cols": 4}, 0.1),
            ("fused_mlp", {"M": 8, "hidden": 8, "inter": 16}, 0.5)]  # fmt: skip
    got = target_compile_ms(rows, figures)
    assert got[0] == pytest.approx((0.1, BY_NAMES))  # its own shape's GEMM: 300 µs / 3
    assert got[1] == pytest.approx((0.05, BY_NAMES))
    assert got[2] == pytest.approx((0.05, BY_RATIO))  # two rmsnorms: which one is which?
    assert got[4] == pytest.approx((0.25, BY_RATIO))  # GEMMs and SiLU apart: the ratio 0.5


@pytest.mark.slow
def test_plan_with_compile_figures_round_trips_and_old_plans_load(tmp_path):
    loaded = load_model(ModelSource(path=EXAMPLES / "single_op.py"))
    prof = run_profile(loaded, iters=1, warmup=0)
    old = tmp_path / "old.yaml"
    write_plan(prof, old)
    (before,) = from_plan(old)
    assert "compile_ms" not in yaml.safe_load(old.read_text())["targets"][0]
    assert before.compile_ms is None and before.mode_share("compile") == before.share

    prof.compiled = _figures({"softmax": [({}, 0.25 * prof.total_ms)]}, prof.total_ms)
    data = plan_data(prof)
    entry = data["targets"][0]
    assert entry["compile_from"] == BY_NAMES
    assert entry["compile_ms"] == pytest.approx(0.25 * prof.total_ms, rel=1e-3)
    assert entry["compile_share"] == pytest.approx(0.5, rel=1e-3)  # of the forward at ratio 0.5
    assert data["compile_forward_ms"] == 1.0 and data["eager_forward_ms"] == 2.0
    assert BY_NAMES in data["compile_attribution"]
    new = tmp_path / "plan.yaml"
    write_plan(prof, new)
    (target,) = from_plan(new)
    assert target.compile_ms == pytest.approx(entry["compile_ms"])
    assert target.mode_share("compile") == pytest.approx(entry["compile_share"])
    assert target.mode_share("eager") == pytest.approx(entry["share"])
    # one call at one shape: the kernel's speedup over the compiled model's own time
    assert target.mode_speedup(entry["compile_ms"] * 500, "compile") == pytest.approx(2.0)


def test_a_model_that_cannot_compile_keeps_its_eager_plan_with_the_reason(monkeypatch):
    import autokernel.model.profiling.profiler as profiler

    def fail(*args, **kwargs):
        raise RuntimeError("no C compiler\nmore")

    monkeypatch.setattr(profiler, "measure_compiled", fail)
    loaded = load_model(ModelSource(path=EXAMPLES / "single_op.py"))
    prof = run_profile(loaded, iters=1, warmup=0)
    profiler.add_compiled(prof, loaded)
    data = plan_data(prof)
    assert data["compile"] == "torch.compile failed: RuntimeError: no C compiler"
    assert "compile_ms" not in data["targets"][0]


@pytest.mark.slow
def test_real_compile_of_the_single_op_example(tmp_path):
    """torch.compile on this machine (C++ on the CPU): the figures land in the plan and view."""
    from rich.console import Console

    from autokernel.model.profiling.profiler import add_compiled
    from autokernel.views.profile import compile_line

    loaded = load_model(ModelSource(path=EXAMPLES / "single_op.py"))
    prof = run_profile(loaded, iters=2, warmup=1)
    add_compiled(prof, loaded, iters=2, warmup=1)
    if prof.compiled is None:
        pytest.skip(prof.compile_note)
    c = prof.compiled
    assert c.compile_forward_ms > 0 and c.eager_forward_ms > 0 and c.compile_total_ms > 0
    entry = plan_data(prof)["targets"][0]
    assert entry["compile_from"] in (BY_NAMES, BY_RATIO) and entry["compile_ms"] > 0
    console = Console(width=200, record=True)
    console.print(compile_line(prof))
    assert "torch.compile: forward" in console.export_text()


def test_on_cuda_named_types_come_from_the_device_kernels_once():
    mm = {"M": 64, "N": 32, "K": 16}
    instances = [
        Instance("matmul", "aten::mm", mm, us=300.0),
        Instance("other", "triton_per_fused__softmax_0 (outside aten ops)", us=150.0),
        Instance("flash_attention", "aten::_scaled_dot_product_flash_attention", us=500.0),
    ]
    kernels = [("sm90_xmma_gemm_bf16bf16_bf16f32", 300.0), ("triton_per_fused__softmax_0", 150.0),
               ("pytorch_flash::flash_fwd_kernel", 500.0)]  # fmt: skip
    by_kind = group_compiled(instances, iterations=1, kernels=kernels)
    assert by_kind == {"matmul": [(mm, 0.3)], "softmax": [({}, 0.15)],
                       "flash_attention": [({}, 0.5)]}  # fmt: skip
