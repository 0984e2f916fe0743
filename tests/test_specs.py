"""Every spec gives the harness what the issue asks of it: sizes, fresh non-zero inputs,
adversarial cases the float64 reference can answer, consistent output dtypes."""

from __future__ import annotations

import pytest
import torch

from autokernel.harness.stages import to_float64
from autokernel.specs import DTYPES, SPECS, get_spec

CPU = torch.device("cpu")


def gen(seed: int) -> torch.Generator:
    return torch.Generator().manual_seed(seed)


def test_nine_types():
    assert set(SPECS) == {
        "matmul", "flash_attention", "fused_mlp", "softmax", "layernorm", "rmsnorm",
        "cross_entropy", "rotary_embedding", "reduce",
    }  # fmt: skip


def test_unknown_type_names_the_known_ones():
    with pytest.raises(ValueError, match="softmax"):
        get_spec("softmaxx")


@pytest.mark.parametrize("name", SPECS)
def test_sizes_per_stage(name):
    spec = SPECS[name]
    for sizes in (spec.gpu, spec.cpu):
        assert 8 <= len(sizes.sweep) <= 10
        assert sizes.bench and sizes.odd
        odd_dims = [v for s in sizes.odd for v in s.values() if v > 2]
        assert any(v & (v - 1) for v in odd_dims), "odd sizes must include non-powers of two"
    assert any(1000 < v < 5000 and v & (v - 1) for s in spec.gpu.odd for v in s.values())


@pytest.mark.parametrize("name", SPECS)
def test_inputs_are_seeded_fresh_and_never_zero(name):
    spec = SPECS[name]
    size = spec.cpu.sweep[2]
    a = spec.make_inputs(size, torch.float32, gen(1), CPU)
    b = spec.make_inputs(size, torch.float32, gen(1), CPU)
    c = spec.make_inputs(size, torch.float32, gen(2), CPU)
    tensors = [(x, y, z) for x, y, z in zip(a, b, c, strict=True) if isinstance(x, torch.Tensor)]
    for x, y, _ in tensors:
        assert torch.equal(x, y), "same seed, same inputs"
        if x.is_floating_point() and x.numel() > 4:
            assert bool((x != 0).any())
    assert any(not torch.equal(x, z) for x, _, z in tensors), "another seed, other inputs"


@pytest.mark.parametrize("name", SPECS)
def test_reference_output_dtype_matches_spec(name):
    spec = SPECS[name]
    for dtype in DTYPES:
        args = spec.make_inputs(spec.cpu.smoke, dtype, gen(0), CPU)
        assert spec.reference(*args).dtype == spec.out_dtype(dtype)


@pytest.mark.slow
@pytest.mark.parametrize("name", SPECS)
def test_adversarial_cases_have_finite_float64_answers(name):
    spec = SPECS[name]
    assert spec.adversarial, "every type has adversarial inputs"
    for case in spec.adversarial:
        for dtype, size in [(d, s) for d in case.dtypes for s in (case.cpu_size, case.gpu_size)]:
            args = case.make(size, dtype, gen(0), CPU)
            ref = spec.reference(*to_float64(args))
            assert torch.isfinite(ref).all(), (case.name, dtype)
            # the answer must be representable in the output dtype, or no kernel could match
            assert torch.isfinite(ref.to(spec.out_dtype(dtype))).all(), (case.name, dtype)


@pytest.mark.parametrize("name", SPECS)
def test_flops_and_bytes_positive(name):
    spec = SPECS[name]
    for size in spec.gpu.bench:
        assert spec.flops(size) > 0
        assert spec.bytes_moved(size, torch.bfloat16) > 0
        # benchmark sizes exceed the 60 MB L2 of an H200 several times for memory-bound types
        if spec.bound == "memory":
            assert spec.bytes_moved(size, torch.bfloat16) > 60e6


def test_labels_follow_dims():
    assert SPECS["softmax"].label({"rows": 4096, "cols": 50257}) == "4096x50257"
    assert SPECS["matmul"].label({"M": 1, "N": 2, "K": 3}) == "1x2x3"
