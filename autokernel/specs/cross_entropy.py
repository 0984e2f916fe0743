"""Spec of cross_entropy: mean token loss over vocabulary-wide rows."""

from __future__ import annotations

import torch
import torch.nn.functional as F

from autokernel import reference
from autokernel.specs.base import Adversarial, KernelSpec, SizeSet, randint, randn
from autokernel.specs.cross_entropy_model import CROSS_ENTROPY_MODEL

DIMS = ("rows", "vocab")


def _targets(rows, vocab, gen, device, ignore_fraction: float = 0.05):
    t = randint((rows,), vocab, gen, device)
    ignore = torch.rand((rows,), generator=gen, device=gen.device).to(device) < ignore_fraction
    ignore[0] = False  # at least one row counts, so the mean is defined
    return t.masked_fill(ignore, reference.IGNORE_INDEX)


def _inputs(size, dtype, gen, device):
    logits = randn((size["rows"], size["vocab"]), dtype, gen, device, scale=2.0)
    return logits, _targets(size["rows"], size["vocab"], gen, device)


def _large_logits(size, dtype, gen, device):
    # Logits in the thousands: exp overflows without the log-sum-exp max trick.
    scale = 3.0e3 if dtype != torch.float32 else 3.0e4
    logits = randn((size["rows"], size["vocab"]), torch.float32, gen, device, scale=scale)
    return logits.clamp(-6.0e4, 6.0e4).to(dtype), _targets(size["rows"], size["vocab"], gen, device)


def _extreme_targets(size, dtype, gen, device):
    # Targets at the first and last class, and ignored rows, where off-by-one indexing shows.
    rows, vocab = size["rows"], size["vocab"]
    logits = randn((rows, vocab), dtype, gen, device, scale=2.0)
    t = torch.zeros(rows, dtype=torch.int64, device=device)
    t[1::3] = vocab - 1
    t[2::3] = reference.IGNORE_INDEX
    return logits, t


def _confident(size, dtype, gen, device):
    # One dominant logit per row at the target: the loss is tiny, so absolute error shows.
    rows, vocab = size["rows"], size["vocab"]
    logits = randn((rows, vocab), torch.float32, gen, device)
    t = randint((rows,), vocab, gen, device)
    logits[torch.arange(rows, device=device), t] = 30.0
    return logits.to(dtype), t


def _bytes(size, dtype):
    rows, vocab = size["rows"], size["vocab"]
    return rows * vocab * dtype.itemsize + rows * 8 + 4


CROSS_ENTROPY = KernelSpec(
    name="cross_entropy",
    arg_names=("logits", "targets"),
    dims=DIMS,
    make_inputs=_inputs,
    flops=lambda s: 4.0 * s["rows"] * s["vocab"],
    bytes_moved=_bytes,
    bound="memory",
    gpu=SizeSet(
        smoke={"rows": 16, "vocab": 4096},
        sweep=(
            {"rows": 1, "vocab": 32000},
            {"rows": 8, "vocab": 50257},
            {"rows": 64, "vocab": 1000},
            {"rows": 128, "vocab": 128256},
            {"rows": 1024, "vocab": 32000},
            {"rows": 4096, "vocab": 4096},
            {"rows": 16, "vocab": 151936},
            {"rows": 2048, "vocab": 50257},
        ),
        odd=(
            {"rows": 1023, "vocab": 1537},
            {"rows": 4097, "vocab": 1023},
            {"rows": 3, "vocab": 50257},
        ),
        bench=(
            {"rows": 8192, "vocab": 128256},
            {"rows": 8192, "vocab": 50257},
            {"rows": 16384, "vocab": 32000},
        ),
    ),
    cpu=SizeSet(
        smoke={"rows": 4, "vocab": 256},
        sweep=(
            {"rows": 1, "vocab": 8},
            {"rows": 4, "vocab": 100},
            {"rows": 16, "vocab": 256},
            {"rows": 32, "vocab": 64},
            {"rows": 8, "vocab": 1000},
            {"rows": 3, "vocab": 2048},
            {"rows": 2, "vocab": 4096},
            {"rows": 64, "vocab": 128},
        ),
        odd=(
            {"rows": 5, "vocab": 1023},
            {"rows": 3, "vocab": 4097},
            {"rows": 7, "vocab": 1537},
        ),
        bench=({"rows": 64, "vocab": 1024},),
    ),
    adversarial=(
        Adversarial(
            "large_logits",
            _large_logits,
            "logits in the thousands: needs the max-subtracted log-sum-exp",
            {"rows": 256, "vocab": 50257},
            {"rows": 6, "vocab": 1000},
        ),
        Adversarial(
            "extreme_targets",
            _extreme_targets,
            "targets 0, vocab-1 and ignore_index -100",
            {"rows": 300, "vocab": 32000},
            {"rows": 9, "vocab": 513},
        ),
        Adversarial(
            "confident_rows",
            _confident,
            "target logit 30 above the rest: loss near zero",
            {"rows": 512, "vocab": 32000},
            {"rows": 8, "vocab": 300},
        ),
    ),
    reference=reference.cross_entropy,
    eager=lambda logits, targets: F.cross_entropy(logits, targets),
    out_dtype=lambda d: torch.promote_types(d, torch.float32),
    model=CROSS_ENTROPY_MODEL,
)
