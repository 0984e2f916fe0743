"""The ceiling of "faster than torch.compile": which kernels count as GEMM, attention or the
rest, and the Amdahl bound the benchmark prints from them (issue 13's limit statement)."""

import pytest

from benchmarks.compile_ceiling import THRESHOLD, category, markdown, split

NAMES = {
    "sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize128x128x64_execute_kernel__5x_cublas": "gemm",
    "nvjet_tst_128x256_64x4_2x1_v_bz_coopB_TNT": "gemm",
    "triton_tem_fused_mm_0": "gemm",
    "void cutlass::Kernel2<cutlass_80_tensorop_bf16_s16816gemm_relu_bf16_64x64>(x)": "gemm",
    "void pytorch_flash::flash_fwd_kernel<Flash_fwd_kernel_traits<128> >(x)": "attention",
    "cudnn_generated_fort_native_sdpa_sm90_flash_fprop_wgmma_f16_knob_3_kernel0_0": "attention",
    "fmha_cutlassF_bf16_aligned_64x64_rf_sm80(PyTorchMemEffAttention::Params)": "attention",
    "triton_per_fused__to_copy_add_mean_mul_pow_rsqrt_0": "rest",
    "triton_poi_fused_addmm_gelu_1": "rest",  # an extern mm's epilogue, not the GEMM
    "triton_poi_fused__scaled_dot_product_cudnn_attention__to_copy_add_0": "rest",  # mask work
    "void at::native::vectorized_elementwise_kernel<4, CUDAFunctor_add<BFloat16> >(x)": "rest",
    "Memset (Device)": "rest",
}


@pytest.mark.parametrize("name", sorted(NAMES))
def test_kernel_categories(name):
    assert category(name) == NAMES[name]


def test_bound_is_kernel_time_over_gemm_and_attention():
    kernels = [("nvjet_tst_x", 160.0), ("flash_fwd_kernel", 20.0), ("triton_poi_fused_add_0", 14.0),
               ("triton_red_fused_mean_1", 6.0)]  # fmt: skip
    s = split(kernels, forwards=2)  # µs over two forwards: per forward 80 + 10 + 10 ms/1e3
    assert s["kernel_ms"] == pytest.approx(0.1)
    assert (s["gemm_ms"], s["attention_ms"], s["rest_ms"]) == pytest.approx((0.08, 0.01, 0.01))
    assert s["rest_share"] == pytest.approx(0.1)
    assert s["bound_x"] == pytest.approx(100 / 90, abs=1e-3)
    # for 1.1x the forward must drop to 100 / 1.1 = 90.9: 9.1 of the rest's 10 must go
    assert s["cut_needed"] == pytest.approx((100 - 100 / 1.1) / 10, abs=1e-3)
    assert s["top"][0]["name"] == "nvjet_tst_x" and s["top"][0]["category"] == "gemm"


def test_no_gemm_no_bound_and_the_verdict_follows_the_threshold():
    assert split([("triton_poi_fused_add_0", 5.0)], 1)["bound_x"] is None

    def result(model, rest_us):
        s = {"wall_ms": 1.0, **split([("nvjet_x", 90.0), ("triton_poi_x", rest_us)], 1)}
        return {"model": model, "compile_vs_eager": 1.5, "eager": s, "compile": s}

    md = markdown([result("near", 5.0), result("far", 20.0)], "GPU", "cmd", "abc")
    assert 100 / 95 < THRESHOLD <= 110 / 90
    assert "near: " in md and "far: " in md
    verdicts = [line for line in md.splitlines() if "reach" in line]
    near, far = (next(v for v in verdicts if v.startswith(f"- {m}:")) for m in ("near", "far"))
    assert "out of reach" in near and "reachable only by removing 50%" in far
