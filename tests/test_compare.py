"""The comparison rule: tolerances by dtype, non-finite handling, and a precise location."""

from __future__ import annotations

import pytest
import torch

from autokernel.harness.compare import compare, describe, shape_dtype_error


def test_within_tolerance_passes():
    e = torch.linspace(-3, 3, 100, dtype=torch.float64)
    assert compare(e + 0.009, e, atol=1e-2, rtol=0.0) is None


@pytest.mark.slow
def test_worst_element_is_located():
    e = torch.zeros(4, 5, dtype=torch.float64) + 1.0
    g = e.clone()
    g[2, 3] += 0.5
    g[1, 1] += 0.05
    m = compare(g, e, atol=1e-2, rtol=1e-2)
    assert m is not None
    assert m.index == [2, 3] and m.n_bad == 2
    assert abs(m.max_abs_err - 0.5) < 1e-12
    assert "(2, 3)" in describe(m, 1e-2, 1e-2)


def test_rtol_scales_with_magnitude():
    e = torch.tensor([1000.0, 1.0], dtype=torch.float64)
    g = torch.tensor([1005.0, 1.0], dtype=torch.float64)
    assert compare(g, e, atol=1e-2, rtol=1e-2) is None
    assert compare(g, e, atol=1e-2, rtol=1e-4) is not None


def test_nan_where_reference_is_finite_fails_and_is_ranked_worst():
    e = torch.ones(10, dtype=torch.float64)
    g = e.clone()
    g[3] = float("nan")
    g[7] = 1.5
    m = compare(g, e, atol=1e-2, rtol=0)
    assert m is not None and m.index == [3] and m.n_bad == 2


def test_matching_infinities_and_nans_pass():
    e = torch.tensor([float("inf"), float("nan"), 1.0], dtype=torch.float64)
    assert compare(e.clone(), e, atol=1e-4, rtol=1e-4) is None
    flipped = torch.tensor([float("-inf"), float("nan"), 1.0], dtype=torch.float64)
    assert compare(flipped, e, atol=1e-4, rtol=1e-4) is not None


def test_scalar_outputs():
    e = torch.tensor(2.0, dtype=torch.float64)
    m = compare(torch.tensor(2.5), e, atol=1e-2, rtol=1e-2)
    assert m is not None and m.index == []


def test_shape_and_dtype_errors_are_specific():
    e = torch.zeros(3, 4, dtype=torch.float64)
    assert "shape" in shape_dtype_error(torch.zeros(4, 3, dtype=torch.float16), e, torch.float16)
    assert "dtype" in shape_dtype_error(torch.zeros(3, 4), e, torch.float16)
    assert "Tensor" in shape_dtype_error([1, 2], e, torch.float16)
    assert shape_dtype_error(torch.zeros(3, 4, dtype=torch.float16), e, torch.float16) is None


def test_a_bool_output_equal_to_the_reference_passes_its_check():
    """A generic region may return a bool tensor (x > t): its check must judge it, not raise
    on `-` or abs() of bools."""
    from dataclasses import replace

    from autokernel.harness.stages import Evaluation, call_checked
    from autokernel.specs import SPECS

    expected = torch.tensor([[True, False, True]])
    spec = replace(SPECS["reduce"], out_dtype=lambda d: torch.bool)
    ev = Evaluation(spec, torch.device("cpu"), 0, call=lambda call: (expected.clone(), 0.0))
    size = {"rows": 1, "cols": 3}
    check, _ = call_checked(ev, "smoke", "inputs", size, torch.float32, (), expected)
    assert check.ok and check.max_abs_err == 0.0
