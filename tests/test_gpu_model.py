"""profile and verify through their CUDA paths: device time attributed once, and the starters put
into the LLaMA-style example in bf16 on the GPU. Skipped without CUDA."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
import torch

from autokernel.model.loading import ModelSource, load_model
from autokernel.model.profiling.profiler import run_profile
from autokernel.model.verify.verifier import collect_kernels, verify_model

ROOT = Path(__file__).parents[1]
LLAMA = ROOT / "examples" / "llama_style.py"
FIVE = ("matmul", "rmsnorm", "flash_attention", "fused_mlp", "rotary_embedding")

pytestmark = pytest.mark.gpu


def llama():
    return load_model(ModelSource(path=LLAMA, dtype="bfloat16", device="cuda"))


def test_cuda_profile_attributes_kernel_time_once():
    prof = run_profile(llama(), iters=3, warmup=2)
    assert prof.device == "cuda" and prof.dtype == "bfloat16"
    assert prof.consistent, (prof.attributed_ms, prof.total_ms, prof.profiler_total_ms)
    # Kernel time per forward cannot exceed the wall time of a synchronized forward.
    assert 0 < prof.total_ms <= prof.wall_ms * 1.05
    assert {r.kind for r in prof.targets} >= set(FIVE)
    assert all(r.dtype in ("bfloat16", "float32") for r in prof.targets)


def test_cuda_verify_runs_every_starter_and_matches_eager(tmp_path):
    ws = tmp_path / "ws"
    (ws / "optimized").mkdir(parents=True)
    for kind in FIVE:
        shutil.copy(ROOT / "kernels" / f"{kind}.py", ws / "optimized" / f"{kind}.py")
    kernels, _, _ = collect_kernels(ws)
    loaded = llama()
    result = verify_model(loaded.model, loaded.inputs, kernels, with_compile=False)
    assert result.ok, (result.outputs, result.errors, result.calls)
    assert all(result.calls[k]["kernel"] > 0 for k in FIVE)
    assert result.clock and result.eager_ms > 0 and result.patched_ms > 0
    torch.cuda.synchronize()
