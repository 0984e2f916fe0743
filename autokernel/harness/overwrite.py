"""Writing new values into a kernel's input tensors in place, whatever their layout.

The timing writes new values into the very tensors that were timed (worker_timing.fresh_data):
a kernel that keeps its output for unchanged inputs must not read as fast. Some inputs share
memory between their elements: Hugging Face's padding mask is a (batch, 1, 1, keys) tensor
expanded over the queries with stride 0, and a model's plan hands that layout to the harness.
`Tensor.copy_` refuses to write such a tensor ("more than one element of the written-to tensor
refers to a single memory location"), which had failed the shipped flash_attention starter as a
CRASH while timed, a false failure on a correct kernel. A generic target's input may overlap
otherwise: Longformer chunks its hidden states with as_strided into overlapping windows, and the
region replays that layout over one storage; the fresh input is built over its own storage with
the same strides, so writing that storage's span writes every window's values at once.
"""

from __future__ import annotations

import torch

__all__ = ["overwrite", "self_overlapping"]


def self_overlapping(t: torch.Tensor) -> bool:
    """Whether two elements of t may share memory. Sufficient test: with the dims of more than
    one element sorted by stride, each stride must exceed the farthest offset the smaller ones
    reach. A layout it cannot prove free of overlap counts as overlapping."""
    reach = 0
    for stride, size in sorted((s, n) for s, n in zip(t.stride(), t.shape, strict=True) if n > 1):
        if stride <= reach:
            return True
        reach += stride * (size - 1)
    return False


def overwrite(dst: torch.Tensor, src: torch.Tensor) -> None:
    """dst's elements := src's. Where dst repeats memory along dims of stride 0 (an expanded
    tensor), one slice along each such dim is written, src's first: the inputs a spec builds
    again with new values have the same layout, so that slice is what every repeat holds.
    A layout that overlaps otherwise is written through its storage span from a src laid out
    alike (the same shape and strides: each element of dst then reads what src's does).
    ValueError where src is laid out otherwise: its values cannot be replaced one for one."""
    if not self_overlapping(dst):
        dst.copy_(src)
        return
    for dim, (stride, size) in enumerate(zip(dst.stride(), dst.shape, strict=True)):
        if stride == 0 and size > 1:
            dst, src = dst.narrow(dim, 0, 1), src.narrow(dim, 0, 1)
    if not self_overlapping(dst):
        dst.copy_(src)
    elif dst.shape == src.shape and dst.stride() == src.stride():
        span = 1 + sum((n - 1) * s for n, s in zip(dst.shape, dst.stride(), strict=True))
        dst.as_strided((span,), (1,)).copy_(src.as_strided((span,), (1,)))
    else:
        raise ValueError(
            f"an input of shape {tuple(dst.shape)} and strides {dst.stride()} overlaps itself "
            "other than by expansion: new values cannot be written into it"
        )
