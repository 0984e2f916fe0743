"""flash_attention under a caller's attn_mask: the reference, the starter (Triton interpreter,
float32) and the model side, eager and under torch.compile. Hugging Face encoders pass such a
mask under torch.compile, where PyTorch's fused attention backends refuse it."""

from __future__ import annotations

import shutil

import pytest
import torch
import torch.nn.functional as F
from torch import nn
from verify_helpers import KERNELS, starters, workspace_with

from autokernel import api, reference
from autokernel.model.kernel_ops import load_kernel
from autokernel.specs import SPECS

SPEC = SPECS["flash_attention"]


def _qkv(b=2, h=2, s=24, d=16, seed=0):
    gen = torch.Generator().manual_seed(seed)
    return [torch.randn(b, h, s, d, generator=gen) for _ in range(3)]


def _padding_mask(b: int, s: int, lengths: list[int]) -> torch.Tensor:
    """(b, 1, s, s) bool, expanded from (b, 1, 1, s) as Hugging Face builds it (stride 0)."""
    keys = torch.arange(s).view(1, 1, 1, s)
    return (keys < torch.tensor(lengths).view(b, 1, 1, 1)).expand(b, 1, s, s)


def test_reference_matches_sdpa_with_bool_and_additive_masks():
    q, k, v = _qkv()
    bool_mask = _padding_mask(2, 24, [24, 9])
    torch.testing.assert_close(
        reference.flash_attention(q, k, v, False, None, bool_mask),
        F.scaled_dot_product_attention(q, k, v, attn_mask=bool_mask),
    )
    bias = torch.randn(2, 1, 24, 24, generator=torch.Generator().manual_seed(3))
    torch.testing.assert_close(
        reference.flash_attention(q, k, v, False, 0.3, bias),
        F.scaled_dot_product_attention(q, k, v, attn_mask=bias, scale=0.3),
    )


def test_reference_gives_zeros_where_a_query_sees_no_key():
    q, k, v = _qkv()
    mask = torch.ones(2, 1, 24, 24, dtype=torch.bool)
    mask[:, :, 5] = False
    out = reference.flash_attention(q, k, v, False, None, mask)
    assert not out.isnan().any()
    assert (out[:, :, 5] == 0).all() and (out[:, :, 4] != 0).any()


def _starter():
    return load_kernel(KERNELS / "flash_attention.py").fn


def test_starter_reads_an_expanded_padding_mask():
    q, k, v = _qkv(s=40)
    mask = _padding_mask(2, 40, [40, 13])
    assert mask.stride()[2] == 0  # the broadcast the kernel must read through
    got = _starter()(q, k, v, False, None, mask)
    torch.testing.assert_close(got, reference.flash_attention(q, k, v, False, None, mask))


def test_starter_matches_the_reference_on_every_masked_cpu_size():
    sizes = [s for s in (*SPEC.cpu.sweep, *SPEC.cpu.odd) if s.get("mask")]
    sizes += [a.cpu_size for a in SPEC.adversarial if a.cpu_size.get("mask")]
    assert {s["mask"] for s in sizes} == {1, 2}
    fn = _starter()
    for size in sizes:
        gen = torch.Generator().manual_seed(1)
        args = SPEC.make_inputs(size, torch.float32, gen, torch.device("cpu"))
        wide = [a.double() if torch.is_tensor(a) and a.is_floating_point() else a for a in args]
        torch.testing.assert_close(
            fn(*args).double(), reference.flash_attention(*wide), rtol=1e-4, atol=1e-4
        )


def test_starter_keeps_a_row_of_finfo_min_a_uniform_average():
    """finfo.min * log2(e) overflows fp32: unclamped, such a row would become zeros."""
    q, k, v = _qkv(b=1, s=20)
    bias = torch.zeros(1, 1, 20, 20)
    bias[:, :, 3] = torch.finfo(torch.float32).min
    got = _starter()(q, k, v, False, None, bias)
    torch.testing.assert_close(got[:, :, 3], v.mean(dim=2), rtol=1e-4, atol=1e-4)


class Encoder(nn.Module):
    """Self-attention as an encoder calls it, with its padding mask."""

    def forward(self, q, k, v, mask):
        return F.scaled_dot_product_attention(q, k, v, attn_mask=mask) * 2.0


def _run(tmp_path, sources, inputs, compiled=False):
    patch = api.load_kernels(workspace_with(tmp_path, sources))
    model = Encoder().eval()
    try:
        with torch.no_grad(), api.use_kernels(model, patch):
            run = torch.compile(model, backend="aot_eager", fullgraph=True) if compiled else model
            got = run(*inputs)
        return got, patch.counts()["flash_attention"]
    finally:
        patch.close()


def test_a_masked_call_runs_the_kernel_eager_and_compiled(tmp_path):
    q, k, v = _qkv()
    inputs = [q, k, v, _padding_mask(2, 24, [24, 7])]
    want = Encoder()(*inputs)
    for compiled in (False, True):
        got, counts = _run(tmp_path / str(compiled), starters("flash_attention"), inputs, compiled)
        torch.testing.assert_close(got, want, rtol=1e-4, atol=1e-4)
        assert counts["kernel"] == 1 and counts["fallback"] == 0, counts


def test_a_mask_the_scores_do_not_broadcast_from_is_not_claimed():
    from autokernel.specs.attention_model import FLASH_ATTENTION_MODEL as side

    q, k, v = _qkv()
    assert side.contract((q, k, v, False, None, _padding_mask(2, 24, [3, 4]))) is None
    why = side.contract((q, k, v, False, None, torch.ones(3, 1, 24, 24, dtype=torch.bool)))
    assert why and "broadcast" in why
    why = side.contract((q, k, v, False, None, torch.ones(2, 1, 24, 24, dtype=torch.int32)))
    assert why and "dtype" in why


def test_a_kernel_without_attn_mask_serves_unmasked_calls_only(tmp_path, monkeypatch):
    """A kernel file written before attn_mask existed still runs the calls it can take; a
    masked call with the same Q, K, V goes to PyTorch, and says why."""
    source = starters("flash_attention")["flash_attention"]
    old = source.replace(
        "    attn_mask: torch.Tensor | None = None,\n) -> torch.Tensor:", ") -> torch.Tensor:"
    ).replace("    if attn_mask is not None:\n", "    attn_mask = None\n    if attn_mask:\n")
    assert old != source
    q, k, v = _qkv()
    mask = _padding_mask(2, 24, [24, 7])
    monkeypatch.setenv("AUTOKERNEL_TRUST_UNJUDGED", "1")  # a file no harness judged
    patch = api.load_kernels(workspace_with(tmp_path, {"flash_attention": old}))
    model = Encoder().eval()
    try:
        with torch.no_grad(), api.use_kernels(model, patch):
            plain = model(q, k, v, None)
            masked = model(q, k, v, mask)
        counts = patch.counts()["flash_attention"]
    finally:
        patch.close()
    torch.testing.assert_close(plain, Encoder()(q, k, v, None), rtol=1e-4, atol=1e-4)
    torch.testing.assert_close(masked, Encoder()(q, k, v, mask))
    assert counts["kernel"] == 1 and counts["fallback"] == 1, counts
    assert any("takes no attn_mask" in r for r in counts["fallback_reasons"]), counts


class HFStyle(nn.Module):
    """Q, K, V as Hugging Face makes them: a projection's (batch, seq, heads, dim) transposed,
    and the padding mask built inside the forward, as under torch.compile."""

    def __init__(self):
        super().__init__()
        self.proj = nn.Linear(16, 48)

    def forward(self, x, lengths):
        b, s, _ = x.shape
        q, k, v = (t.view(b, s, 2, 8).transpose(1, 2) for t in self.proj(x).split(16, dim=-1))
        mask = (torch.arange(s).view(1, 1, 1, s) < lengths.view(b, 1, 1, 1)).expand(b, 1, s, s)
        out = F.scaled_dot_product_attention(q, k, v, attn_mask=mask)
        return out.transpose(1, 2).reshape(b, s, 16) + 1.0


@pytest.mark.skipif(shutil.which("gcc") is None and shutil.which("cc") is None,
                    reason="torch.compile on the CPU needs a C compiler")  # fmt: skip
def test_inductor_code_gets_the_layout_its_fake_promised(tmp_path):
    """Inductor asserts each op output's strides against the fake's: the kernel's output for
    a transposed Q must come out in the layout the fake gives (it failed with 'expected
    stride 16==256' while the fake was contiguous and the starter kept Q's layout)."""
    torch.manual_seed(0)
    x, mask = torch.randn(2, 24, 16), torch.tensor([24, 5])
    model = HFStyle().eval()
    with torch.no_grad():
        want = model(x, mask)
    patch = api.load_kernels(workspace_with(tmp_path, starters("flash_attention")))
    try:
        torch._dynamo.reset()
        with torch.no_grad(), api.use_kernels(model, patch):
            got = torch.compile(model, fullgraph=True)(x, mask)
        counts = patch.counts()["flash_attention"]
    finally:
        patch.close()
    torch.testing.assert_close(got, want, rtol=1e-4, atol=1e-4)
    assert counts["kernel"] == 1, counts


def test_a_masked_plan_target_is_timed_under_its_mask(tmp_path):
    """profile writes args {causal: false, mask: 1} for a masked call; the harness sizes of that
    target carry the mask, so the night times and checks the kernel as the model calls it."""
    from autokernel.targets import from_plan

    plan = tmp_path / "plan.yaml"
    plan.write_text(
        "targets:\n- {kernel_type: flash_attention, args: {causal: false, mask: 1},\n"
        "   shapes: [{batch: 2, heads: 4, kv_heads: 4, seq: 64, head_dim: 16}]}\n"
    )
    (target,) = from_plan(plan)
    (size,) = target.harness_sizes()
    assert size["mask"] == 1 and size["causal"] == 0
    gen = torch.Generator().manual_seed(0)
    args = SPEC.make_inputs(size, torch.float32, gen, torch.device("cpu"))
    assert args[5] is not None and args[5].dtype == torch.bool and args[3] is False


def test_starter_reads_masks_constant_along_keys_or_queries():
    """Masks shared by all queries (a padding mask), by all keys (Hugging Face's all-ones mask
    under torch.compile) or by neither, expanded with zero strides: the reference's answer,
    bool and additive."""
    q, k, v = _qkv(s=37)
    gen = torch.Generator().manual_seed(5)
    per_query = torch.rand(2, 1, 37, 1, generator=gen) > 0.2  # stride 0 over keys once expanded
    per_key = torch.rand(2, 1, 1, 37, generator=gen) > 0.2
    tile = torch.rand(2, 1, 37, 37, generator=gen) > 0.2
    fn = _starter()
    for mask in (per_query, per_key, tile):
        for m in (mask.expand(2, 1, 37, 37), torch.where(mask, 0.0, -3.0).expand(2, 1, 37, 37)):
            want = reference.flash_attention(q, k, v, False, None, m)
            torch.testing.assert_close(fn(q, k, v, False, None, m), want, rtol=1e-4, atol=1e-4)


def test_starter_reads_a_mask_constant_along_keys_as_one_column():
    """A mask constant along keys (Hugging Face 5.17's under torch.compile) is read as one
    column per tile; any other layout, a padding mask included, as a tile per key block."""
    import importlib.util

    spec = importlib.util.spec_from_file_location("fa_starter", KERNELS / "flash_attention.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    per_key = torch.ones(2, 1, 37, 1, dtype=torch.bool).expand(2, 1, 37, 37)
    assert mod._mask_mode(per_key.stride()) == 2
    assert mod._mask_mode(_padding_mask(2, 37, [37, 5]).stride()) == 1
    assert mod._mask_mode(torch.ones(2, 1, 37, 37).stride()) == 1


@pytest.mark.slow
def test_the_starter_passes_and_is_timed_at_a_masked_plan_shape():
    """A masked plan target is timed on its expanded mask: the timing's fresh calls write new
    values into that stride-0 tensor in place, which `Tensor.copy_` refuses to write."""
    from autokernel.harness.sandbox import Options, evaluate

    size = {"batch": 2, "heads": 2, "kv_heads": 2, "seq": 32, "head_dim": 16, "causal": 0,
            "mask": 1}  # fmt: skip
    verdict = evaluate(
        KERNELS / "flash_attention.py",
        Options(extra_sizes=[size], quick=True, compile_baseline=False, seed=7),
    )
    assert verdict.status.value == "PASS", verdict.message
    assert any("mask=1" in t.size and t.us > 0 for t in verdict.timings), verdict.timings
