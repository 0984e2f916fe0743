"""Interleaved comparison of two kernels (the loop's keep rule): a copy ties, a slowed copy
loses, a wrong or hanging candidate comes back as an error, never an exception."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest
import torch

from autokernel.harness.interleave import Comparison, _size_entry, relative_half_spread
from autokernel.harness.sandbox import Options, compare

STARTER = Path(__file__).parents[1] / "kernels" / "softmax.py"
ROUNDS = 3  # enough for a median under the interpreter; the loop uses the default 5
HANG_TIMEOUT_S = 5.0
SLACK_S = 30.0  # start-up of the worker and torch, on a busy two-core machine


def variant(tmp_path: Path, name: str, tail: str = "", replace: tuple[str, str] = ("", "")) -> Path:
    source = STARTER.read_text()
    if replace[0]:
        assert replace[0] in source, "the starter changed: update this test's edit"
        source = source.replace(*replace)
    path = tmp_path / f"{name}.py"
    path.write_text(source + tail)
    return path


@pytest.fixture(scope="module")
def same(tmp_path_factory) -> Comparison:
    tmp = tmp_path_factory.mktemp("same")
    return compare(variant(tmp, "best"), variant(tmp, "candidate"), Options(seed=1), ROUNDS)


@pytest.mark.slow
def test_a_copy_ties(same):
    assert same.error is None, same.error
    assert 0.5 < same.ratio < 2.0
    assert same.noise >= 0.0 and same.harness_s > 0
    [size] = same.sizes  # the CPU benchmark size of softmax
    assert size["size"] == "64x1024" and len(size["rounds_us"]) == ROUNDS
    assert size["best_us"] > 0 and size["candidate_us"] > 0


def test_comparison_round_trips_through_json():
    pairs = [(2.0, 1.8), (2.1, 1.9), (2.05, 2.0)]
    c = Comparison(1.08, 0.02, [_size_entry("4x256", torch.float32, pairs)], None, 3.5, {"a": 1.0})
    assert Comparison.from_json(json.loads(json.dumps(c.to_json()))) == c


@pytest.mark.slow
def test_a_candidate_doing_its_work_four_times_loses(tmp_path):
    slow = variant(
        tmp_path,
        "slow",
        "\n\n_once = kernel_fn\n\n\ndef kernel_fn(x):\n"
        "    for _ in range(3):\n        _once(x)\n    return _once(x)\n",
    )
    c = compare(variant(tmp_path, "best"), slow, Options(seed=2), ROUNDS)
    assert c.error is None, c.error
    assert c.ratio < 0.6, f"4x the work measured as ratio {c.ratio:.2f}"


@pytest.mark.slow
def test_a_candidate_wrong_only_in_its_timed_calls_is_an_error(tmp_path):
    """Right in the checked call, zeros in every later call of a comparison (its module name
    says which role it has): the timed rounds' outputs, sampled at random, are checked."""
    cheat = variant(
        tmp_path,
        "cheat",
        "\n\n_honest = kernel_fn\nSEEN = {}\n\n\ndef kernel_fn(x):\n"
        "    key = (tuple(x.shape), x.dtype, x.data_ptr())\n"
        "    SEEN[key] = SEEN.get(key, 0) + 1\n"
        "    if __name__.endswith('_1') and SEEN[key] > 1:\n"
        "        return torch.zeros_like(x)\n"
        "    return _honest(x)\n",
    )
    c = compare(variant(tmp_path, "best"), cheat, Options(seed=3), ROUNDS)
    assert c.error and c.error.startswith("candidate kernel: the output of a timed call"), c.error


@pytest.mark.slow
def test_a_wrong_candidate_is_an_error(tmp_path):
    wrong = variant(
        tmp_path,
        "wrong",
        replace=("e * (1.0 / tl.sum(e, axis=1))", "e * (1.5 / tl.sum(e, axis=1))"),
    )
    c = compare(variant(tmp_path, "best"), wrong, Options(seed=3), ROUNDS)
    assert c.error and c.error.startswith("candidate kernel: FAIL at 64x1024"), c.error
    assert not c.sizes


@pytest.mark.slow
def test_a_hanging_candidate_is_an_error_within_the_timeout(tmp_path):
    hang = variant(tmp_path, "hang", "\n\ndef kernel_fn(x):\n    while True:\n        pass\n")
    t0 = time.monotonic()
    c = compare(variant(tmp_path, "best"), hang, Options(seed=4, timeout_s=HANG_TIMEOUT_S))
    assert c.error and c.error.startswith("TIMEOUT in compare 64x1024"), c.error
    assert time.monotonic() - t0 < HANG_TIMEOUT_S + SLACK_S


def test_a_statically_rejected_candidate_starts_no_process(tmp_path):
    bad = variant(tmp_path, "bad", "\n\nimport subprocess\n")
    t0 = time.perf_counter()
    c = compare(variant(tmp_path, "best"), bad)
    assert c.error and c.error.startswith("candidate kernel: REJECTED in static"), c.error
    assert time.perf_counter() - t0 < 2.0


def test_noise_is_the_relative_half_p20_p80_spread():
    assert relative_half_spread([1.0]) == 0.0
    assert relative_half_spread([1.0] * 5) == 0.0
    spread = relative_half_spread([0.9, 0.95, 1.0, 1.05, 1.1])
    assert 0.05 < spread < 0.1


BEST_WATCHES_ITS_INPUT = """
SEEN = []

def kernel_fn(x):
    SEEN.append((x.is_contiguous(), x.stride()))
    return x.clone()
"""
# x.set_ (an allowed op: the interpreter's own marshalling uses it) re-points a tensor object. In
# a comparison both kernels were handed the very same input objects, so the candidate left the
# best a transposed layout of the same values for every timed round, and the best was timed on
# uncoalesced reads (on a GPU) while the candidate put its own layout back first.
CANDIDATE_RELAYOUTS_THE_INPUT = """
def kernel_fn(x):
    out = x.clone()
    x.set_(x.t().contiguous().t())  # same values, column-major: for the next kernel to read
    return out
"""


def test_a_kernel_cannot_change_the_inputs_the_other_kernel_is_handed(tmp_path):
    from autokernel.harness.serve import Session
    from autokernel.specs import resolve

    files = []
    for name, text in (("best", BEST_WATCHES_ITS_INPUT), ("cand", CANDIDATE_RELAYOUTS_THE_INPUT)):
        files.append(tmp_path / f"{name}.py")
        files[-1].write_text(text)
    session = Session(resolve("softmax"), torch.device("cpu"), 1, tmp_path, monitor=False)
    assert session.import_files([str(f) for f in files], ["best_t", "cand_t"]) == {
        "ok": True, "builds": []
    }  # fmt: skip
    request = {"make": "inputs", "size": {"rows": 4, "cols": 8}, "dtype": "float32",
               "key": ["k"], "out_shape": [4, 8], "out_dtype": "float32"}  # fmt: skip
    for role in (1, 0):  # the candidate's checked call, then the best's
        assert "out" in session.call({**request, "role": role})
    for role in (1, 0, 1, 0):  # timed rounds, candidate first
        session._fn(role)()
    seen = session.modules[0].SEEN
    assert all(contiguous for contiguous, _ in seen), seen


# In a comparison both kernels read one input storage. A candidate whose checked call left its
# input alone but whose timed calls wrote into it left the best kernel other values to be timed
# and sampled on (tests/faults/softmax_inputs_rewritten_when_timed.py, in a single evaluation).
CANDIDATE_REWRITES_WHEN_TIMED = """
CALLS = [0]

def kernel_fn(x):
    CALLS[0] += 1
    out = x.clone()
    if CALLS[0] > 1:  # the checked call is the first
        x.add_(1.0)
    return out
"""


def test_a_kernel_that_writes_its_inputs_while_timed_ends_the_comparison(tmp_path):
    from autokernel.harness.serve import Session
    from autokernel.specs import resolve

    files = []
    for name, text in (("best", "def kernel_fn(x):\n    return x.clone()\n"),
                       ("cand", CANDIDATE_REWRITES_WHEN_TIMED)):  # fmt: skip
        files.append(tmp_path / f"{name}.py")
        files[-1].write_text(text)
    session = Session(resolve("softmax"), torch.device("cpu"), 1, tmp_path, monitor=False)
    assert session.import_files([str(f) for f in files], ["best_w", "cand_w"])["ok"]
    request = {"make": "inputs", "size": {"rows": 4, "cols": 8}, "dtype": "float32",
               "key": ["k"], "out_shape": [4, 8], "out_dtype": "float32"}  # fmt: skip
    for role in (0, 1):
        assert "out" in session.call({**request, "role": role})
    reply = session.rounds({"rounds": 2, "label": "4x8", "roles": ["best", "candidate"]},
                           lambda p: None)  # fmt: skip
    assert "candidate kernel" in reply.get("error", ""), reply
    assert "modified one of its inputs while timed" in reply["error"]


def test_inputs_must_stay_the_same_bits():
    """-0.0 for 0.0 and one NaN for another pass torch.equal; an input must not change at all."""
    from autokernel.harness.serve import same_bits

    a = torch.tensor([0.0, 1.0, float("nan")])
    assert same_bits(a, a.clone())
    assert not same_bits(a, torch.tensor([-0.0, 1.0, float("nan")]))
    assert not same_bits(a, a.to(torch.float64))
