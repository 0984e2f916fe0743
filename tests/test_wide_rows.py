"""The "split" variant of softmax and cross_entropy (a row spread over several programs, partial
max/sum merged by log-sum-exp) passes the five stages and matches the reference on odd widths.

SPLIT_CHUNK is set far below the shipped values so the CPU sizes really split into several
chunks per row, tails included."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from autokernel import reference
from autokernel.agents.tuner import read_config, write_config
from autokernel.harness.sandbox import Options, evaluate
from autokernel.harness.verdict import Status
from autokernel.model.kernel_ops import load_kernel
from autokernel.specs import SPECS

KERNELS = Path(__file__).parents[1] / "kernels"
CHUNK = 256  # columns per program: 1023 columns make 4 chunks, the last one partial
WIDTHS = (1023, 1537, 4097)
DTYPES = (torch.float32, torch.float16)


def _split_copy(tmp_path: Path, name: str) -> Path:
    config, _ = read_config((KERNELS / f"{name}.py").read_text())
    # BLOCK_SIZE below the chunk: each program walks its chunk in two tiles.
    config.update(VARIANT="split", SPLIT_CHUNK=CHUNK, BLOCK_SIZE=CHUNK // 2)
    path = tmp_path / f"{name}.py"
    path.write_text(write_config((KERNELS / f"{name}.py").read_text(), config))
    return path


def _load_split(tmp_path: Path, monkeypatch, name: str):
    """kernel_fn of the split copy, and a list that records each call of its split path (so a
    test knows the rows really were split)."""
    fn = load_kernel(_split_copy(tmp_path, name)).fn
    calls: list = []
    inner = fn.__globals__["_split"]

    def counting(*args):
        calls.append(args)
        return inner(*args)

    monkeypatch.setitem(fn.__globals__, "_split", counting)  # the module's own namespace
    return fn, calls


@pytest.mark.slow
@pytest.mark.parametrize("name", ["softmax", "cross_entropy"])
def test_split_variant_passes_all_stages(tmp_path, name):
    sizes = (*SPECS[name].cpu.sweep, *SPECS[name].cpu.odd)
    assert sum(max(s.values()) > 2 * CHUNK for s in sizes) >= 3, "too few sizes split"
    v = evaluate(
        _split_copy(tmp_path, name),
        Options(quick=True, timing=False, compile_baseline=False, seed=1),
    )
    assert v.status is Status.PASS, f"{v.message}\n{v.failure}\n{v.stderr_tail}"


def _gen(seed: int) -> torch.Generator:
    return torch.Generator().manual_seed(seed)


@pytest.fixture
def softmax(tmp_path, monkeypatch):
    return _load_split(tmp_path, monkeypatch, "softmax")


@pytest.fixture
def cross_entropy(tmp_path, monkeypatch):
    return _load_split(tmp_path, monkeypatch, "cross_entropy")


@pytest.mark.slow
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("shape", [(3, w) for w in WIDTHS] + [(2, 3, 1537)], ids=str)
def test_softmax_split_matches_reference(softmax, shape, dtype):
    fn, calls = softmax
    x = (torch.randn(shape, generator=_gen(shape[-1])) * 3.0).to(dtype)
    y = fn(x)
    assert calls, "the row was not split"
    assert y.shape == x.shape and y.dtype == dtype
    atol, rtol = SPECS["softmax"].tolerance(dtype)
    torch.testing.assert_close(y.double(), reference.softmax(x.double()), atol=atol, rtol=rtol)


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_softmax_split_minus_inf_rows(softmax, dtype):
    fn, _ = softmax
    x = torch.randn((4, 1537), generator=_gen(0)).to(dtype)
    x[1] = float("-inf")  # all -inf: NaN, as torch gives
    x[2, :700] = float("-inf")  # whole chunks of -inf before the first finite value
    x[3, 1000:] = float("-inf")  # -inf chunks after it, through the tail
    y = fn(x)
    assert y[1].isnan().all()
    atol, rtol = SPECS["softmax"].tolerance(dtype)
    expected = reference.softmax(x.double())
    torch.testing.assert_close(y.double(), expected, atol=atol, rtol=rtol, equal_nan=True)


@pytest.mark.slow
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("vocab", WIDTHS)
def test_cross_entropy_split_matches_reference(cross_entropy, vocab, dtype):
    fn, calls = cross_entropy
    rows = 7
    logits = (torch.randn((rows, vocab), generator=_gen(vocab)) * 3.0).to(dtype)
    targets = torch.randint(0, vocab, (rows,), generator=_gen(vocab + 1))
    targets[1::3] = reference.IGNORE_INDEX
    targets[0], targets[2] = 0, vocab - 1  # first class, and the last one in the tail chunk
    loss = fn(logits, targets)
    assert calls, "the row was not split"
    assert loss.shape == () and loss.dtype == torch.float32
    atol, rtol = SPECS["cross_entropy"].tolerance(dtype)
    expected = reference.cross_entropy(logits.double(), targets)
    torch.testing.assert_close(loss.double(), expected, atol=atol, rtol=rtol)


def test_cross_entropy_split_all_ignored_is_nan(cross_entropy):
    fn, _ = cross_entropy
    logits = torch.randn((3, 1023), generator=_gen(2))
    targets = torch.full((3,), reference.IGNORE_INDEX)
    assert fn(logits, targets).isnan()
