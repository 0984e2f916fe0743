"""New values written into timed inputs of any layout (autokernel.harness.overwrite): the fresh
calls of every timing write into the inputs in place, and a model's plan hands the harness
Hugging Face's padding mask, expanded over the queries with stride 0."""

from __future__ import annotations

import pytest
import torch

from autokernel.harness.overwrite import overwrite, self_overlapping


def _expanded_mask(lengths: list[int], s: int = 6) -> torch.Tensor:
    keys = torch.arange(s).view(1, 1, 1, s)
    return (keys < torch.tensor(lengths).view(-1, 1, 1, 1)).expand(len(lengths), 1, s, s)


def test_an_expanded_mask_takes_the_new_values_in_place():
    dst, src = _expanded_mask([2, 5]), _expanded_mask([4, 1])
    with pytest.raises(RuntimeError, match="single memory location"):
        _expanded_mask([3, 3]).copy_(src)  # what the timing did before
    ptr = dst.data_ptr()
    overwrite(dst, src)
    assert torch.equal(dst, src) and dst.data_ptr() == ptr and dst.stride()[2] == 0


@pytest.mark.parametrize(
    "make",
    [
        lambda: torch.arange(24.0).view(4, 6),
        lambda: torch.arange(24.0).view(4, 6).t(),  # strided, no overlap
        lambda: torch.arange(48.0).view(4, 12)[:, ::2],  # gaps between elements
    ],
)
def test_a_layout_without_overlap_is_copied_element_for_element(make):
    dst = make()
    src = torch.randn(dst.shape)
    overwrite(dst, src)
    assert torch.equal(dst, src)
    assert not self_overlapping(dst)


def test_a_self_overlapping_layout_other_than_expansion_is_refused():
    base = torch.zeros(10)
    windows = base.as_strided((4, 4), (1, 1))  # sliding windows: elements shared across rows
    assert self_overlapping(windows)
    with pytest.raises(ValueError, match="overlaps itself"):
        overwrite(windows, torch.randn(4, 4))


def test_overlap_is_told_from_the_strides():
    assert self_overlapping(torch.zeros(3, 1).expand(3, 4))
    assert not self_overlapping(torch.zeros(1, 4).expand(1, 4))  # a size-1 dim repeats nothing
    assert not self_overlapping(torch.zeros(2, 3, 4).permute(2, 0, 1))


def test_overlapping_windows_take_the_values_of_windows_laid_out_alike():
    """Longformer-style chunks (as_strided windows over one storage): a generic region's fresh
    input is the same windows over a new storage, so its values can be written in place."""
    dst = torch.zeros(64).as_strided((15, 8), (4, 1))
    src = torch.randn(64).as_strided((15, 8), (4, 1))
    ptr = dst.data_ptr()
    overwrite(dst, src)
    assert torch.equal(dst, src) and dst.data_ptr() == ptr and dst.stride() == (4, 1)


def test_expanded_overlapping_windows_are_written_too():
    dst = torch.zeros(20).as_strided((3, 4, 5), (0, 3, 1))
    src = torch.randn(20).as_strided((3, 4, 5), (0, 3, 1))
    overwrite(dst, src)
    assert torch.equal(dst, src)
