"""verify, patching and the custom ops on the CPU: the nine starters put into a tiny LLaMA-style
model under the Triton interpreter (float32: the interpreter's bf16 arithmetic is wrong)."""

from __future__ import annotations

import importlib.util
import os
import shutil
import subprocess
from pathlib import Path

import pytest
import torch
import torch.nn.functional as F
import typer
from torch import nn
from torch._subclasses.fake_tensor import FakeTensorMode
from typer.testing import CliRunner

from autokernel import api, reference
from autokernel.cli.verify import verify_command
from autokernel.model import kernel_ops
from autokernel.model.kernel_ops import load_kernel
from autokernel.model.patching import Patch
from autokernel.model.verify.prediction import amdahl
from autokernel.model.verify.verifier import (
    VerifyError,
    collect_kernels,
    verify_model,
    verify_workspace,
)
from autokernel.run import state as run_state
from autokernel.specs import SPECS
from autokernel.targets import Target

ROOT = Path(__file__).parents[1]
KERNELS = ROOT / "kernels"
LLAMA_EXAMPLE = ROOT / "examples" / "llama_style.py"


# --- a tiny model that uses all nine kernel types ----------------------------------------------


class RMSNorm(nn.Module):
    def __init__(self, dim: int, eps: float = 1e-6) -> None:
        super().__init__()
        self.weight = nn.Parameter(1 + 0.1 * torch.randn(dim))
        self.eps = eps

    def forward(self, x):
        xf = x.float()
        return (xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + self.eps) * self.weight).to(
            x.dtype
        )


def apply_rotary(x, cos, sin):
    half = x.shape[-1] // 2
    return x * cos + torch.cat((-x[..., half:], x[..., :half]), dim=-1) * sin


class MLP(nn.Module):
    def __init__(self, d: int, i: int) -> None:
        super().__init__()
        self.gate_proj = nn.Linear(d, i, bias=False)
        self.up_proj = nn.Linear(d, i, bias=False)
        self.down_proj = nn.Linear(i, d, bias=False)

    def forward(self, x):
        return self.down_proj(F.silu(self.gate_proj(x)) * self.up_proj(x))


class Block(nn.Module):
    def __init__(self, d: int, h: int, kvh: int, i: int) -> None:
        super().__init__()
        self.h, self.kvh, self.hd = h, kvh, d // h
        self.attn_norm, self.mlp_norm = RMSNorm(d), RMSNorm(d)
        self.q_proj = nn.Linear(d, d, bias=False)
        self.k_proj = nn.Linear(d, kvh * self.hd, bias=False)
        self.v_proj = nn.Linear(d, kvh * self.hd, bias=False)
        self.o_proj = nn.Linear(d, d, bias=False)
        self.mlp = MLP(d, i)

    def forward(self, x, cos, sin):
        b, s, d = x.shape
        hx = self.attn_norm(x)
        q = self.q_proj(hx).view(b, s, self.h, self.hd).transpose(1, 2)
        k = self.k_proj(hx).view(b, s, self.kvh, self.hd).transpose(1, 2)
        v = self.v_proj(hx).view(b, s, self.kvh, self.hd).transpose(1, 2)
        q, k = apply_rotary(q, cos, sin), apply_rotary(k, cos, sin)
        a = F.scaled_dot_product_attention(q, k, v, is_causal=True, enable_gqa=True)
        x = x + self.o_proj(a.transpose(1, 2).reshape(b, s, d))
        return x + self.mlp(self.mlp_norm(x))


class Tiny(nn.Module):
    """LLaMA blocks, then a LayerNorm head, softmax, a last-dim torch.sum and the loss."""

    def __init__(self, vocab=64, d=32, h=4, kvh=2, i=64, layers=2, seq=8) -> None:
        super().__init__()
        torch.manual_seed(0)
        self.embed = nn.Embedding(vocab, d)
        self.blocks = nn.ModuleList(Block(d, h, kvh, i) for _ in range(layers))
        self.norm = nn.LayerNorm(d)
        self.head = nn.Linear(d, vocab)
        inv = 1.0 / 10000 ** (torch.arange(0, d // h, 2).float() / (d // h))
        f = torch.outer(torch.arange(seq).float(), inv)
        self.register_buffer("cos", torch.cat((f, f), -1).cos(), persistent=False)
        self.register_buffer("sin", torch.cat((f, f), -1).sin(), persistent=False)

    def forward(self, ids, targets):
        x, s = self.embed(ids), ids.shape[1]
        for blk in self.blocks:
            x = blk(x, self.cos[:s], self.sin[:s])
        logits = self.head(self.norm(x))
        probs = F.softmax(logits, dim=-1)
        loss = F.cross_entropy(logits.reshape(-1, logits.shape[-1]), targets.reshape(-1))
        return probs, torch.sum(probs * logits, dim=-1), loss


def tiny_inputs() -> list[torch.Tensor]:
    gen = torch.Generator().manual_seed(1)
    return [
        torch.randint(0, 64, (2, 8), generator=gen),
        torch.randint(0, 64, (2, 8), generator=gen),
    ]


def workspace_with(tmp_path: Path, sources: dict[str, str]) -> Path:
    """A workspace holding optimized/<name>.py files, as a finished run leaves them."""
    opt = tmp_path / "ws" / "optimized"
    opt.mkdir(parents=True)
    for name, text in sources.items():
        (opt / f"{name}.py").write_text(text)
    return opt.parent


def starters(*names: str) -> dict[str, str]:
    return {n: (KERNELS / f"{n}.py").read_text() for n in names or SPECS}


def broken_rmsnorm() -> str:
    text = (KERNELS / "rmsnorm.py").read_text()
    good = "y = x * rstd[:, None] * w"  # the single path and both chunked branches
    assert text.count(good) == 3
    return text.replace(good, "y = 1.05 * x * rstd[:, None] * w")


# --- the whole model ---------------------------------------------------------------------------


@pytest.mark.slow
def test_nine_starters_match_eager_and_every_replacement_runs(tmp_path):
    kernels, _, notes = collect_kernels(workspace_with(tmp_path, starters()))
    assert sorted(k.kernel_type for k in kernels) == sorted(SPECS) and not notes
    result = verify_model(Tiny().eval(), tiny_inputs(), kernels, timing=False)
    assert result.outputs_match, result.outputs
    assert not result.errors, result.errors
    assert result.ok
    for kind in SPECS:
        assert result.calls[kind]["kernel"] > 0, (kind, result.calls[kind])
    # 2 blocks: 4 RMSNorms, 4 rotary calls (q and k), 2 attentions, 2 MLPs; 8 + 1 Linears
    # outside the MLPs (the MLPs' own Linears belong to fused_mlp).
    expected = {"rmsnorm": 4, "rotary_embedding": 4, "flash_attention": 2, "fused_mlp": 2,
                "matmul": 9, "layernorm": 1, "softmax": 1, "cross_entropy": 1,
                "reduce": 1}  # fmt: skip
    assert {k: c["kernel"] for k, c in result.calls.items()} == expected
    assert all(c["fallback"] == 0 for c in result.calls.values())
    assert len(result.outputs) == 3 and all(o.error < 1e-5 for o in result.outputs)


def test_wrong_kernel_is_reported_as_a_mismatch(tmp_path, monkeypatch):
    monkeypatch.setenv("AUTOKERNEL_TRUST_UNJUDGED", "1")  # a hand-broken kernel no run judged
    kernels, _, _ = collect_kernels(workspace_with(tmp_path, {"rmsnorm": broken_rmsnorm()}))
    result = verify_model(Tiny().eval(), tiny_inputs(), kernels, timing=False)
    assert result.calls["rmsnorm"]["kernel"] == 4
    assert not result.outputs_match and not result.ok
    assert max(o.error for o in result.outputs) > 10 * result.outputs[0].tolerance


def test_replacement_that_never_matches_is_an_error(tmp_path):
    # layernorm: the model without its head has no LayerNorm at all; matmul with policy "plan"
    # at shapes the model never uses: every call falls back.
    model = Tiny().eval()
    ks = [
        load_kernel(KERNELS / "layernorm.py"),
        load_kernel(KERNELS / "matmul.py", shapes=[{"M": 4096, "N": 4096, "K": 4096}]),
    ]
    block = model.blocks[0]
    x = torch.randn(1, 8, 32)
    result = verify_model(block, [x, model.cos, model.sin], ks, policy="plan", timing=False)
    assert result.outputs_match and not result.ok
    errors = "\n".join(result.errors)
    assert "layernorm: never called: nothing in the model matched (nn.LayerNorm" in errors
    assert "matmul: never called: all 7 calls fell back: shape 8x" in errors
    assert "not in the plan" in errors


@pytest.mark.parametrize("traced", [False, True], ids=["swapped-callees", "function-mode"])
def test_calls_outside_the_contract_fall_back_and_tensor_methods_are_routed(traced):
    """The matcher claims only calls of the type's semantics (softmax over the last dim, a
    default cross-entropy, a sum over the last dim; tensor methods included, as profile found
    them); a claimed call outside the kernel's contract (float64) falls back and is counted;
    softmax over dim 0 or a full sum is another op, left to PyTorch (or a generic target).
    Eager forwards route by swapped callees, traced ones by a TorchFunctionMode: alike."""
    patch = Patch(
        [load_kernel(KERNELS / f"{n}.py") for n in ("softmax", "cross_entropy", "reduce")]
    )

    class Calls(nn.Module):
        def forward(self, x, t):
            return (F.softmax(x, dim=0), F.softmax(x.double(), dim=-1), F.softmax(x, dim=-1),
                    F.cross_entropy(x, t, reduction="sum"), torch.sum(x, dim=-1, keepdim=True),
                    x.softmax(-1), x.sum(-1), torch.sum(x))  # fmt: skip

    model = Calls()
    x, t = torch.randn(3, 5), torch.tensor([0, 4, -100])
    originals = (F.softmax, torch.softmax, F.cross_entropy, torch.sum)
    want = (torch.softmax(x, 0), reference.softmax(x.double()), reference.softmax(x),
            F.cross_entropy(x, t, reduction="sum"), x.sum(-1, keepdim=True), reference.softmax(x),
            x.sum(-1))  # fmt: skip
    try:
        with patch.applied(model, traced=traced), torch.no_grad():
            got = model(x, t)
    finally:
        patch.close()
    assert (F.softmax, torch.softmax, F.cross_entropy, torch.sum) == originals
    for g, w in zip(got[:7], want, strict=True):
        torch.testing.assert_close(g, w)
    assert got[7] == x.sum()
    c = patch.counts()
    assert c["softmax"]["kernel"] == 2 and c["softmax"]["sites"] == 3
    assert c["softmax"]["fallback_reasons"] == {"dtype float64": 1}
    assert c["cross_entropy"]["sites"] == 0 and c["cross_entropy"]["kernel"] == 0
    assert c["reduce"]["kernel"] == 2 and c["reduce"]["fallback"] == 0 and c["reduce"]["sites"] == 2


def test_duck_typed_module_that_computes_something_else_is_left_alone():
    class GemmaRMSNorm(RMSNorm):
        def forward(self, x):
            return reference.rmsnorm(x, 1 + self.weight, self.eps)

    class GeluMLP(MLP):
        def forward(self, x):
            return self.down_proj(F.gelu(self.gate_proj(x)) * self.up_proj(x))

    model = nn.Sequential(GemmaRMSNorm(16), GeluMLP(16, 32))
    patch = Patch([load_kernel(KERNELS / "rmsnorm.py"), load_kernel(KERNELS / "fused_mlp.py")])
    try:
        with patch.applied(model):
            pass
    finally:
        patch.close()
    assert sum(patch.sites.values()) == 0
    assert any("0: left alone: does not compute rmsnorm" in n for n in patch.notes), patch.notes
    assert any("1: left alone: does not compute a SwiGLU MLP" in n for n in patch.notes)


# --- the custom ops ----------------------------------------------------------------------------


def op_inputs(kind: str) -> tuple:
    spec = SPECS[kind]
    gen = torch.Generator().manual_seed(0)
    return spec.make_inputs(spec.cpu.smoke, torch.float32, gen, torch.device("cpu"))


@pytest.mark.parametrize("kind", SPECS)
def test_fake_impl_gives_the_reference_shape_and_dtype(kind):
    args = op_inputs(kind)
    want = getattr(reference, kind)(*args)
    with FakeTensorMode() as mode:
        fake = [mode.from_tensor(a) if isinstance(a, torch.Tensor) else a for a in args]
        got = kernel_ops.OPS[kind](*fake, 0)  # no router for slot 0: the fake must not need one
    assert (got.shape, got.dtype) == (want.shape, want.dtype)


def test_ops_pass_opcheck_and_route_to_the_kernel():
    router = kernel_ops.Router("rmsnorm", [load_kernel(KERNELS / "rmsnorm.py")])
    slot = kernel_ops.register(router)
    try:
        x, w, eps = op_inputs("rmsnorm")
        torch.library.opcheck(
            kernel_ops.rmsnorm.op, (x, w, eps, slot), test_utils=("test_schema", "test_faketensor")
        )
        torch.testing.assert_close(
            kernel_ops.rmsnorm(x, w, eps, slot), reference.rmsnorm(x, w, eps)
        )
    finally:
        kernel_ops.unregister(slot)
    assert router.kernel_calls >= 2 and not router.fallbacks


def test_patched_model_traces_under_torch_compile(tmp_path):
    model = Tiny(layers=1).eval()
    inputs = tiny_inputs()
    patch = api.load_kernels(workspace_with(tmp_path, starters("rmsnorm", "flash_attention")))
    try:
        with torch.no_grad():
            want = model(*inputs)
            with api.use_kernels(model, patch):
                compiled = torch.compile(model, backend="aot_eager", fullgraph=True)
                got = compiled(*inputs)
    finally:
        patch.close()
    for g, w in zip(got, want, strict=True):
        torch.testing.assert_close(g, w, rtol=1e-4, atol=1e-4)
    assert patch.counts()["rmsnorm"]["kernel"] == 2
    assert patch.counts()["flash_attention"]["kernel"] == 1


# --- the Python API, the workspace and the command ---------------------------------------------


def test_use_kernels_routes_eager_forwards_without_a_torch_function_mode(tmp_path):
    """An eager forward inside use_kernels routes by swapped callees: a TorchFunctionMode held
    for the block taxed every other torch call of the forward (view 0.9 -> 10.7 us, CPU)."""
    modes_seen = []

    class Probe(nn.Module):
        def forward(self, x):
            modes_seen.append(len(torch.overrides._get_current_function_mode_stack()))
            return torch.softmax(x.view(4, 8), -1)

    model = Probe()
    patch = api.load_kernels(workspace_with(tmp_path, starters("softmax")))
    try:
        with api.use_kernels(model, patch), torch.no_grad():
            got = model(torch.randn(32))
        assert modes_seen == [0]
        assert patch.counts()["softmax"]["kernel"] == 1
        assert "forward" not in vars(model)  # restored after the block
        torch.testing.assert_close(got.sum(-1), torch.ones(4))
    finally:
        patch.close()


def test_an_install_gives_back_the_forward_it_found(tmp_path):
    """A forward the user had set on the instance (a wrapper, an outer patch) is restored."""
    model = Tiny(layers=1).eval()
    theirs = model.forward
    model.forward = theirs  # an instance attribute now, as a wrapper would set it
    patch = api.load_kernels(workspace_with(tmp_path, starters("softmax")))
    try:
        with api.use_kernels(model, patch):
            assert vars(model)["forward"] is not theirs
        assert vars(model)["forward"] is theirs
    finally:
        patch.close()


def test_patch_model_for_good_and_remove(tmp_path):
    model = Tiny(layers=1).eval()
    patch = api.patch_model(model, workspace_with(tmp_path, starters("softmax", "matmul")))
    original_softmax = F.softmax
    with torch.no_grad():
        model(*tiny_inputs())
    assert F.softmax is original_softmax  # swapped only while the forward ran
    # 4 attention projections, 3 MLP Linears (no fused_mlp kernel here) and the head
    assert patch.counts()["softmax"]["kernel"] == 1 and patch.counts()["matmul"]["kernel"] == 8
    assert "forward" in vars(model.head)
    patch.remove()
    assert "forward" not in vars(model.head) and "forward" not in vars(model)
    with pytest.raises(RuntimeError, match="patch was removed"):
        kernel_ops.matmul(torch.ones(2, 2), torch.ones(2, 2), patch.slots["matmul"])


def git(root: Path, *args: str) -> str:
    env = {**os.environ, "GIT_CONFIG_GLOBAL": os.devnull, "GIT_CONFIG_NOSYSTEM": "1"}
    out = subprocess.run(["git", *args], cwd=root, capture_output=True, text=True, env=env)
    assert out.returncode == 0, out.stderr
    return out.stdout.strip()


def test_kernels_from_the_state_file_and_best_commits(tmp_path):
    ws = workspace_with(tmp_path, {"rmsnorm": (KERNELS / "rmsnorm.py").read_text()})
    git(ws, "init", "-q")
    shutil.copy(KERNELS / "softmax.py", ws / "kernel.py")
    git(ws, "add", "kernel.py")
    git(ws, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "exp 1")
    sha = git(ws, "rev-parse", "HEAD")
    state = run_state.new_state("t", "tuner", 1.0, [
        Target("rmsnorm", "rmsnorm", share=0.5), Target("softmax", "softmax", share=0.3),
        Target("matmul", "matmul", share=0.1),
    ])  # fmt: skip
    for ts, x in zip(state.targets, (2.0, 1.5, None), strict=True):
        ts.best = run_state.Score(us=1.0, spread=0.0, speedup_vs_eager=x)
    state.target("softmax").best_commit = sha
    run_state.save(state, ws)
    kernels, origin, notes = collect_kernels(ws)
    assert [(k.name, k.kernel_type) for k in kernels] == [
        ("rmsnorm", "rmsnorm"),
        ("softmax", "softmax"),
    ]
    assert origin["softmax"] == f"kernel.py at {sha[:10]}"
    assert notes == ["matmul: skipped: no optimized/matmul.py and no kept commit"]
    # 1 / (0.5/2 + 0.3/1.5 + 0.2): only kernels that ran count.
    assert amdahl(ws, {"rmsnorm", "softmax"}) == pytest.approx(1 / 0.65)
    assert amdahl(ws, {"rmsnorm"}) == pytest.approx(1 / 0.75)
    assert amdahl(ws, set()) is None


def test_prediction_uses_the_models_own_time_for_a_target(tmp_path):
    """The model's RMSNorm (fp32 ops) took 1.2 ms for 5 calls; the kernel takes 24 µs a call:
    10x in the model even though it is only 1.16x faster than reference.py's eager code."""
    ws = tmp_path / "ws"
    ws.mkdir()
    one = ({"rows": 8192, "cols": 2048},)
    rms = Target("rmsnorm", "rmsnorm", shapes=one, share=0.2, calls=5, model_ms=1.2)
    two = Target("softmax", "softmax", shapes=one * 2, share=0.3, model_ms=1.0)  # two shapes
    state = run_state.new_state("t", "tuner", 1.0, [rms, two])
    state.targets[0].best = run_state.Score(us=24.0, spread=0.0, speedup_vs_eager=1.16)
    state.targets[1].best = run_state.Score(us=10.0, spread=0.0, speedup_vs_eager=1.5)
    run_state.save(state, ws)
    assert amdahl(ws, {"rmsnorm"}) == pytest.approx(1 / (0.8 + 0.2 / 10))
    # several shapes: one µs figure cannot be set against the model's time: vs eager instead
    assert amdahl(ws, {"softmax"}) == pytest.approx(1 / (0.7 + 0.3 / 1.5))


def test_a_kernel_slower_than_eager_is_left_out_when_asked(tmp_path):
    ws = tmp_path / "ws"
    (ws / "optimized").mkdir(parents=True)
    for name in ("rmsnorm", "softmax", "reduce", "layernorm"):
        shutil.copy(KERNELS / f"{name}.py", ws / "optimized" / f"{name}.py")
    # layernorm: slower than reference.py's eager code, but the model's own (profiled at 10 µs a
    # call) is slower still: in the model it is a 10x gain, so it stays
    mine = Target("layernorm", "layernorm", shapes=({"rows": 8, "cols": 64},), model_ms=0.01)
    state = run_state.new_state("t", "tuner", 1.0, [
        Target("rmsnorm", "rmsnorm", share=0.5), Target("softmax", "softmax", share=0.3),
        Target("reduce", "reduce", share=0.1), mine,
    ])  # fmt: skip
    for ts, x in zip(state.targets, (1.3, 0.6, None, 0.6), strict=True):
        ts.best = run_state.Score(us=1.0, spread=0.0, speedup_vs_eager=x)
    run_state.save(state, ws)
    kept, _, notes = collect_kernels(ws, skip_slower=True)
    assert [k.name for k in kept] == ["rmsnorm", "reduce", "layernorm"]  # reduce: unmeasured
    assert (
        len(notes) == 1 and notes[0].startswith("softmax: left to PyTorch") and "0.60x" in notes[0]
    )
    assert [k.name for k in collect_kernels(ws)[0]] == ["rmsnorm", "softmax", "reduce", "layernorm"]


def test_empty_workspace_is_a_clear_error(tmp_path):
    with pytest.raises(VerifyError, match="no kernels in"):
        collect_kernels(tmp_path)


def test_empty_workspace_fails_before_the_model_loads(tmp_path, monkeypatch):
    import autokernel.model.loading

    def never(source):
        raise AssertionError("the model was loaded for a workspace with no kernels")

    monkeypatch.setattr(autokernel.model.loading, "load_model", never)
    with pytest.raises(VerifyError, match="no kernels in"):
        verify_workspace(object(), tmp_path)


def llama_example():
    spec = importlib.util.spec_from_file_location("llama_style_for_verify", LLAMA_EXAMPLE)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.skipif(not LLAMA_EXAMPLE.exists(), reason="examples/llama_style.py not there yet")
def test_llama_example_uses_its_five_replacements(tmp_path):
    mod = llama_example()
    model = mod.Model(64, 32, 4, 2, 48, 1).eval()
    ids = torch.randint(0, 64, (1, 8), generator=torch.Generator().manual_seed(0))
    kinds = ("matmul", "rmsnorm", "flash_attention", "fused_mlp", "rotary_embedding")
    kernels, _, _ = collect_kernels(workspace_with(tmp_path, starters(*kinds)))
    result = verify_model(model, [ids], kernels, timing=False)
    assert result.ok, (result.outputs, result.errors)
    assert {k: c["kernel"] for k, c in result.calls.items()} == {
        "matmul": 5, "rmsnorm": 3, "flash_attention": 1, "fused_mlp": 1, "rotary_embedding": 2,
    }  # fmt: skip


@pytest.mark.skipif(not LLAMA_EXAMPLE.exists(), reason="examples/llama_style.py not there yet")
def test_command_exit_codes_and_json(tmp_path, monkeypatch):
    monkeypatch.setenv("AUTOKERNEL_TRUST_UNJUDGED", "1")  # a hand-broken kernel no run judged
    app = typer.Typer()
    app.command("verify")(verify_command)
    app.callback()(lambda: None)
    runner = CliRunner()
    ws = workspace_with(tmp_path, {"rmsnorm": broken_rmsnorm()})
    args = ["verify", str(LLAMA_EXAMPLE), "-w", str(ws), "--device", "cpu", "--dtype", "float32"]
    out = tmp_path / "v.json"
    res = runner.invoke(app, [*args, "--no-compile", "--json", str(out)])
    assert res.exit_code == 1, res.output
    assert "MISMATCH" in res.output and "CPU perf_counter" in res.output
    import json

    data = json.loads(out.read_text())
    assert data["ok"] is False and data["calls"]["rmsnorm"]["kernel"] > 0
    # the wrong kernel is not timed: patched runs without kernels, and the note says why
    assert data["eager_ms"] > 0 and data["patched_ms"] == data["eager_ms"]
    assert data["modes"]["patched"]["kernels"] == []
    assert any("rmsnorm: left out of the timing" in n for n in data["notes"])
    res = runner.invoke(app, ["verify", str(LLAMA_EXAMPLE), "-w", str(tmp_path / "none")])
    assert res.exit_code == 2 and "no kernels in" in res.output
