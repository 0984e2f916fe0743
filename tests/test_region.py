"""Capturing a region of a model (autokernel.model.capture) and replaying its description: the
reference of a generic target, computed from data alone."""

from __future__ import annotations

import math

import pytest
import torch
import torch.nn.functional as F
import yaml

from autokernel.model.capture import CaptureError, capture
from autokernel.specs.generic import generic_spec
from autokernel.specs.region import Region, RegionError


def rotate_half(x):
    x1, x2 = x[..., : x.shape[-1] // 2], x[..., x.shape[-1] // 2 :]
    return torch.cat((-x2, x1), dim=-1)


def apply_rotary_pos_emb(q, k, cos, sin, unsqueeze_dim=1):
    """transformers' Llama rotary, written out as it is there."""
    cos, sin = cos.unsqueeze(unsqueeze_dim), sin.unsqueeze(unsqueeze_dim)
    return (q * cos) + (rotate_half(q) * sin), (k * cos) + (rotate_half(k) * sin)


def rms_channels(x):
    return x / torch.sqrt(torch.mean(x**2, dim=1, keepdim=True) + 1e-6)


GEN = torch.Generator().manual_seed(0)
CASES = {
    "gelu_tanh": (lambda x: F.gelu(x, approximate="tanh"), [torch.randn(8, 64, generator=GEN)]),
    "log_softmax": (lambda x: torch.log_softmax(x, dim=-1), [torch.randn(6, 40, generator=GEN)]),
    "rms_4d": (rms_channels, [torch.randn(2, 16, 4, 4, generator=GEN)]),
    "sum_middle": (lambda x: torch.sum(x, dim=1), [torch.randn(2, 16, 8, generator=GEN)]),
    # fp32 statistics of a bf16 input, cast back: the reference must compute all of it in fp64
    "rms_fp32_stats": (lambda x: (x.float() * torch.rsqrt(x.float().pow(2).mean(-1, keepdim=True)
                                                          + 1e-6)).to(x.dtype),
                       [torch.randn(4, 32, generator=GEN).to(torch.bfloat16)]),
    "rotary": (apply_rotary_pos_emb, [torch.randn(1, 4, 16, 8, generator=GEN),
                                      torch.randn(1, 2, 16, 8, generator=GEN),
                                      torch.randn(1, 16, 8, generator=GEN),
                                      torch.randn(1, 16, 8, generator=GEN)]),
}  # fmt: skip
_regions: dict[str, Region] = {}


def region(name: str) -> Region:
    if name not in _regions:
        fn, xs = CASES[name]
        _regions[name] = capture(fn, xs, name)
    return _regions[name]


def flat(out) -> torch.Tensor:
    outs = out if isinstance(out, tuple) else (out,)
    return torch.cat([o.reshape(-1) for o in outs]) if len(outs) > 1 else outs[0]


@pytest.mark.parametrize("name", CASES)
def test_replay_is_the_model_and_float64_is_the_reference(name):
    fn, xs = CASES[name]
    r = region(name)
    assert torch.equal(r.replay(xs), flat(fn(*xs)))
    exact = r.replay([x.double() for x in xs], upcast=True)
    assert exact.dtype == torch.float64
    assert torch.allclose(exact, flat(fn(*[x.double() for x in xs])).double(), atol=1e-12)


def test_the_ops_are_kept_as_the_model_called_them():
    ops = {n["op"] for n in region("gelu_tanh").nodes}
    assert "aten.gelu.default" in ops
    (gelu,) = [n for n in region("gelu_tanh").nodes if n["op"] == "aten.gelu.default"]
    assert gelu["kwargs"] == {"approximate": "tanh"}
    rotary = {n["op"] for n in region("rotary").nodes}
    assert {"aten.cat.default", "aten.neg.default", "aten.mul.Tensor"} <= rotary
    assert {"aten._log_softmax.default"} <= {n["op"] for n in region("log_softmax").nodes}


def test_sizes_are_symbols_and_other_sizes_replay():
    r = region("rms_4d")
    assert r.symbols == dict(zip(("s33", "s50", "s69", "s87"), (2, 16, 4, 4), strict=True)) or (
        sorted(r.symbols.values()) == [2, 4, 4, 16]
    )
    assert len(r.symbols) == 4  # the two 4s stay two symbols: no duck sizing
    x = torch.randn(3, 5, 7, 2)
    torch.testing.assert_close(r.replay([x]), rms_channels(x))
    rot = region("rotary")
    q, k, cos, sin = (torch.randn(1, 3, 10, 6), torch.randn(1, 1, 10, 6), torch.randn(1, 10, 6),
                      torch.randn(1, 10, 6))  # fmt: skip
    torch.testing.assert_close(rot.replay([q, k, cos, sin]),
                               flat(apply_rotary_pos_emb(q, k, cos, sin)))  # fmt: skip


def test_bind_accepts_the_traced_layout_and_names_what_differs():
    r = region("rms_4d")
    x = torch.randn(2, 16, 4, 4)
    assert r.bind([x]) == dict(r.symbols)
    assert "strides" in r.bind([x.transpose(2, 3)])
    assert "dtype" in r.bind([x.half()])
    assert "rank" in r.bind([x[0]])


def test_description_round_trips_through_yaml():
    r = region("rotary")
    again = Region.from_dict(yaml.safe_load(yaml.safe_dump(r.to_dict())))
    assert again == r and again.digest() == r.digest()
    assert region("gelu_tanh").digest() != region("log_softmax").digest()


@pytest.mark.parametrize(
    ("mutate", "message"),
    [
        (lambda d: d["nodes"].append({"op": "builtins.eval", "args": ["1"]}), "not an aten op"),
        (lambda d: d["nodes"].append({"op": "aten.nosuchop.default", "args": []}), "aten op"),
        (lambda d: d["nodes"].insert(0, {"op": "aten.neg.default", "args": [{"ref": 3}]}),
         "earlier"),
        (lambda d: d["inputs"][0].update(dtype="complex64"), "dtype"),
        (lambda d: d["inputs"][0].update(sizes=["__import__('os')"]), "size"),
    ],
)  # fmt: skip
def test_a_description_names_nothing_but_aten_ops_and_sizes(mutate, message):
    data = region("gelu_tanh").to_dict()
    mutate(data)
    with pytest.raises(RegionError, match=message):
        Region.from_dict(data)


def test_in_place_and_random_regions_are_refused():
    with pytest.raises(CaptureError):
        capture(lambda x: x.add_(1.0), [torch.randn(4)])
    with pytest.raises(CaptureError):
        capture(lambda x: F.dropout(x, 0.5, training=True), [torch.randn(4)])


def test_generic_spec_sizes_perturb_every_symbol_and_inputs_keep_the_layout():
    r = region("sum_middle")
    spec = generic_spec(r.to_dict())
    sizes = spec.cpu.sweep
    assert sizes[0] == r.symbols
    assert len(sizes) >= 5 and len({tuple(s.items()) for s in sizes}) == len(sizes)
    for name in r.symbols:  # each symbol moves alone in some size
        alone = [s for s in sizes if [k for k in s if s[k] != r.symbols[k]] == [name]]
        assert alone, name
    assert any(all(v % 2 for v in s.values()) for s in spec.cpu.odd)
    gen = torch.Generator().manual_seed(0)
    (x,) = spec.make_inputs(sizes[1], torch.float32, gen, torch.device("cpu"))
    assert list(x.shape) == [sizes[1][n] for n in r.symbols] and x.is_contiguous()
    want = spec.reference(x.double())
    torch.testing.assert_close(spec.eager(x).double(), want, rtol=1e-5, atol=1e-5)
    assert spec.out_dtype(torch.float32) == torch.float32 and spec.dtypes == (torch.float32,)


def test_generic_inputs_follow_the_models_sign():
    r = capture(lambda x: torch.sqrt(x), [torch.rand(64) + 0.1])
    spec = generic_spec(r.to_dict())
    gen = torch.Generator().manual_seed(0)
    (x,) = spec.make_inputs(spec.cpu.smoke, torch.float32, gen, torch.device("cpu"))
    assert float(x.min()) >= 0 and math.isfinite(float(spec.reference(x.double()).sum()))
