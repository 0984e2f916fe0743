"""Every table the CLI prints stays readable in a 100-column terminal: no line is wider, no
figure is cut short or broken over two lines, nothing is elided with an ellipsis. The data are
GPU-sized (long shapes, big figures, long module lists), the widest the views meet."""

from __future__ import annotations

import io
from pathlib import Path

import pytest
from rich.console import Console

from autokernel.harness.verdict import Check, StageResult, Status, Timing, Verdict
from autokernel.model.profiling.profile import Profile, Row

WIDTH = 100
REPORT_TSV = (
    Path(__file__).resolve().parents[1] / "benchmarks/results/h200-run-softmax-2026-12-03.tsv"
)


def rendered(renderable) -> str:
    console = Console(width=WIDTH, record=True, file=io.StringIO())
    console.print(renderable)
    return console.export_text()


def assert_readable(text: str, figures: list[str]) -> None:
    lines = text.splitlines()
    assert max(len(line) for line in lines) <= WIDTH, text
    assert "…" not in text, text
    for figure in figures:  # each on one line, whole
        assert any(figure in line for line in lines), f"{figure!r} broken or missing:\n{text}"


def _profile() -> Profile:
    where = ["model.layers.*.self_attn.q_proj", "model.layers.*.self_attn.k_proj",
             "model.layers.*.self_attn.v_proj", "model.layers.*.self_attn.o_proj"]  # fmt: skip
    rows = [
        Row("fused_mlp", "LlamaMLP", {"M": 16384, "hidden": 4096, "inter": 14336}, "bfloat16",
            {}, 1234.567, 32, 0.41, ["model.layers.*.mlp"]),
        Row("matmul", "Linear", {"M": 16384, "N": 4096, "K": 4096}, "bfloat16", {}, 987.654, 128,
            0.22, where),
        Row("flash_attention", "aten::scaled_dot_product_attention",
            {"batch": 8, "heads": 32, "kv_heads": 8, "seq": 2048, "head_dim": 128}, "bfloat16",
            {"causal": True, "scale": 0.08838834764831845}, 456.789, 32, 0.15,
            ["model.layers.*.self_attn"]),
        Row("rmsnorm", "LlamaRMSNorm", {"rows": 16384, "cols": 4096}, "float32", {"eps": 1e-06},
            45.678, 65, 0.02, ["model.layers.*.input_layernorm",
                               "model.layers.*.post_attention_layernorm", "model.norm"]),
        Row("other", "triton_per_fused__to_copy_add_mean_mul_pow_rsqrt_0 (outside aten ops)",
            {}, "bfloat16", {}, 12.345, 64, 0.004, ["model.layers.*"]),
    ]  # fmt: skip
    return Profile("llama-3-8b-style", "cuda", "bfloat16", 5, rows, 3000.0, 3000.0, 3000.0, 0.0,
                   3001.0)  # fmt: skip


def test_profile_table_at_100_columns():
    from autokernel.views.profile import profile_table

    text = rendered(profile_table(_profile()))
    assert_readable(text, ["16384x4096x14336", "1234.567", "41.0", "1.26x", "8x32x8x2048x128",
                           "16384x4096 float32", "model.layers.*.post_attention_layernorm",
                           "triton_per_fused"])  # fmt: skip


def _verdict() -> Verdict:
    timings = [
        Timing("16384x16384", "bfloat16", 1234.5678, 12.34, 2345.678, 1987.654, 3519.87, "GB/s",
               82.85, 1.9, 1.61),
        Timing("4096x4096x14336", "bfloat16", 987.654, 1.23, 1011.5, 999.1, 712.34, "TFLOPS",
               97.8, 1.02, 1.01),
    ]  # fmt: skip
    worst = Check("sweep", "4096x4097", "float16", True, max_abs_err=1.2e-3)
    stages = [StageResult(n, "PASS", 27, worst, 12.34) for n in
              ("smoke", "sweep", "adversarial", "determinism", "odd sizes")]  # fmt: skip
    return Verdict(Status.PASS, "fused_mlp", "/home/user/a/long/path/to/workspace/kernel.py",
                   stages=stages, timings=timings, clock="cuda do_bench median (L2 flushed)",
                   device="NVIDIA H200", harness_s=123.4)  # fmt: skip


def test_verdict_view_at_100_columns():
    from autokernel.views.verdict import verdict_view

    text = rendered(verdict_view(_verdict()))
    assert_readable(text, ["16384x16384", "4096x4096x14336", "1235", "3520 GB/s", "712.3 TFLOPS",
                           "82.8", "2346", "1.61", "4096x4097 float16"])  # fmt: skip


def test_gpu_table_at_100_columns():
    from autokernel import gpu
    from autokernel.views.gpu import gpu_table

    rows = gpu.table_rows()
    text = rendered(gpu_table(rows))
    assert_readable(text, [r["name"] for r in rows] + ["4800", "990", "MI355X"])


@pytest.mark.skipif(not REPORT_TSV.exists(), reason="the recorded run is not in this checkout")
def test_report_at_100_columns(tmp_path):
    from autokernel.report import build
    from autokernel.views.report import view

    (tmp_path / "results.tsv").write_text(REPORT_TSV.read_text())
    text = rendered(view(build(tmp_path)))
    assert_readable(text, ["softmax"])
