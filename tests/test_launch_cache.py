"""The starters' launch plans: a call signature's plan (grid, block sizes, strides, compiled
kernel) is reused only by calls it fits, and reusing it changes no output bit. A stale plan
would read rows with another call's strides or sizes: wrong numbers, silently."""

from __future__ import annotations

import importlib.util
import types
from pathlib import Path

import pytest
import torch

from autokernel import launch as fast_launch
from autokernel import reference
from autokernel.specs import SPECS

KERNELS = Path(__file__).resolve().parents[1] / "kernels"


def _load(name: str, tag: str = ""):
    spec = importlib.util.spec_from_file_location(f"plan_{name}{tag}", KERNELS / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _inputs(kind: str, seed: int, dtype: torch.dtype = torch.float32) -> tuple:
    spec = SPECS[kind]
    gen = torch.Generator().manual_seed(seed)
    return spec.make_inputs(spec.cpu.smoke, dtype, gen, torch.device("cpu"))


def _same_bits(a: torch.Tensor, b: torch.Tensor) -> bool:
    return a.shape == b.shape and a.dtype == b.dtype and torch.equal(a.view(-1), b.view(-1))


@pytest.mark.slow
@pytest.mark.parametrize("kind", SPECS)
def test_a_reused_plan_gives_the_bits_of_a_fresh_one(kind):
    cached = _load(kind, "_cached")
    cached.kernel_fn(*_inputs(kind, 0))  # plans this signature
    args = _inputs(kind, 1)  # same signature, other values
    again = cached.kernel_fn(*args)
    assert len(cached._PLANS) == 1
    fresh = _load(kind, "_fresh").kernel_fn(*args)
    assert _same_bits(again, fresh)


def _row_cases(kind: str) -> list[tuple]:
    """Calls that differ from the first in one thing each: rows, width, row stride, layout,
    dtype. x is the first argument; the rest are per-width parameters."""
    g = torch.Generator().manual_seed(3)

    def args(x: torch.Tensor) -> tuple:
        n = x.shape[-1]
        w = torch.randn(n, generator=g).to(x.dtype)
        b = torch.randn(n, generator=g).to(x.dtype)
        return {"rmsnorm": (x, w, 1e-6), "layernorm": (x, w, b, 1e-5)}.get(kind, (x,))

    def randn(*shape: int, dtype: torch.dtype = torch.float32) -> torch.Tensor:
        return torch.randn(*shape, generator=g).to(dtype)

    return [
        args(randn(6, 40)),
        args(randn(9, 40)),  # more rows
        args(randn(6, 72)),  # wider rows
        args(randn(6, 100)[:, :40]),  # same shape, rows 100 apart
        args(randn(3, 6, 40).transpose(0, 1)),  # rows that no single stride reaches
        args(randn(6, 40, dtype=torch.float16)),
        args(randn(6, 40)),  # the first signature again
    ]


@pytest.mark.slow
@pytest.mark.parametrize("kind", ["rmsnorm", "layernorm", "softmax", "reduce"])
def test_a_call_with_another_signature_never_reuses_a_plan(kind):
    module = _load(kind)
    ref = getattr(reference, kind)
    for args in _row_cases(kind):
        got, want = module.kernel_fn(*args), ref(*args)
        torch.testing.assert_close(got, want, rtol=2e-3, atol=2e-3)
    assert len(module._PLANS) == 6


@pytest.mark.slow
def test_a_changed_config_is_a_new_plan():
    module = _load("softmax")
    x = torch.randn(3, 3000)
    module.kernel_fn(x)
    module.CONFIG["VARIANT"] = "split"  # in place, as a tuner or a user might
    module.CONFIG["SPLIT_CHUNK"] = 1024
    torch.testing.assert_close(module.kernel_fn(x), reference.softmax(x))
    assert len(module._PLANS) == 2


@pytest.mark.slow
def test_matmul_plans_follow_the_layout_of_b():
    module = _load("matmul")
    a, b = torch.randn(16, 32), torch.randn(32, 24)
    torch.testing.assert_close(module.kernel_fn(a, b), a @ b)
    bt = b.t().contiguous().t()  # same shape, column-major
    torch.testing.assert_close(module.kernel_fn(a, bt), a @ bt)


def test_a_mask_off_16_byte_alignment_is_a_new_plan():
    # Triton specializes an aligned pointer for vector loads; reusing that kernel for a mask that
    # starts off alignment (a slice of a larger one) would load across the misaligned address.
    module = _load("flash_attention")
    q = torch.randn(1, 1, 8, 16)
    full = torch.randn(8 * 8 + 1)
    for mask in (full[:64].view(8, 8), full[1:].view(8, 8)):
        torch.testing.assert_close(
            module.kernel_fn(q, q, q, causal=False, attn_mask=mask),
            reference.flash_attention(q, q, q, causal=False, attn_mask=mask),
        )
    assert len(module._PLANS) == 2


class _Compiled:
    """Stands in for triton.compiler.CompiledKernel: its launcher (`run`, called directly) and
    its public `compiled[grid](*args)` both record what they get."""

    function, packed_metadata = "cu-function", "packed"

    def __init__(self, log: list, refuse: bool = False) -> None:
        self.log, self.refuse = log, refuse

    def run(self, *args) -> None:
        if self.refuse:
            raise TypeError("launcher takes other arguments")
        self.log.append(("direct", args))

    def __getitem__(self, grid):
        dims = (grid[0], grid[1], grid[2])  # as CompiledKernel's runner reads them
        return lambda *args: self.log.append(("compiled", dims, args))


class _Kernel:
    """Stands in for a @triton.jit function: `kernel[grid](...)` records and returns _Compiled."""

    def __init__(self, refuse: bool = False) -> None:
        self.log: list = []
        self.refuse = refuse
        self.pre_run_hooks: list = []

    def __getitem__(self, grid):
        def launch(*args, **options):
            self.log.append(("usual", grid, args, options))
            return _Compiled(self.log, self.refuse)

        return launch


class _Driver:
    active = types.SimpleNamespace(
        get_current_device=lambda: 3, get_current_stream=lambda d: d * 10
    )


@pytest.fixture
def gpu_stand_ins(monkeypatch):
    """A CompiledKernel class and a CUDA driver for the launch helpers, on the CPU."""
    import triton

    monkeypatch.setattr(triton.compiler, "CompiledKernel", _Compiled)
    monkeypatch.setattr(triton.runtime.jit, "JITFunction", _Kernel)
    monkeypatch.setattr(triton.runtime, "driver", _Driver)
    return triton.knobs.runtime


@pytest.mark.parametrize("kind", SPECS)
def test_later_launches_call_the_compiled_launcher_with_every_argument(kind, gpu_stand_ins):
    kernel = _Kernel()
    launch = fast_launch.launcher(kernel, (7, 2), (64, True, "fp64"), {"num_warps": 4})
    for live in (("x", "y"), ("x2", "y2"), ("x3", "y3")):
        launch(*live)
    direct = (7, 2, 1, 30, "cu-function", "packed", None, None, None)  # stream of device 3
    assert kernel.log == [
        ("usual", (7, 2), ("x", "y", 64, True, "fp64"), {"num_warps": 4}),
        ("direct", (*direct, "x2", "y2", 64, True, "fp64")),
        ("direct", (*direct, "x3", "y3", 64, True, "fp64")),
    ]


def test_a_registered_launch_hook_gets_triton_s_own_launch(gpu_stand_ins, monkeypatch):
    """A profiler's launch hooks see every launch: the direct call would bypass them."""
    hooks = type(gpu_stand_ins.launch_enter_hook)()
    hooks.add(lambda metadata: None)
    monkeypatch.setattr(gpu_stand_ins, "launch_enter_hook", hooks)
    kernel = _Kernel()
    launch = fast_launch.launcher(kernel, (5,), (1,), {})
    launch("a")
    launch("b")
    assert kernel.log[1] == ("compiled", (5, 1, 1), ("b", 1))


def test_an_autotuned_or_hooked_kernel_keeps_triton_s_usual_launch(gpu_stand_ins):
    """An autotuner adds its config's arguments in each launch; a pre-run hook must run."""

    class Tuned:  # not a JITFunction
        def __init__(self) -> None:
            self.inner = _Kernel()

        def __getitem__(self, grid):
            return self.inner[grid]

    hooked = _Kernel()
    hooked.pre_run_hooks.append(lambda *args, **kwargs: None)
    for kernel, log in ((t := Tuned(), t.inner.log), (hooked, hooked.log)):
        launch = fast_launch.launcher(kernel, (5,), (1,), {})
        launch("a")
        launch("b")
        assert [entry[0] for entry in log] == ["usual", "usual"]


def test_a_launcher_that_refuses_the_direct_call_falls_back_for_good(gpu_stand_ins):
    kernel = _Kernel(refuse=True)
    launch = fast_launch.launcher(kernel, (5,), (1,), {})
    for live in "abc":
        launch(live)
    assert kernel.log[1:] == [("compiled", (5, 1, 1), ("b", 1)), ("compiled", (5, 1, 1), ("c", 1))]


@pytest.mark.parametrize("kind", SPECS)
def test_without_a_compiled_kernel_every_launch_is_the_usual_one(kind):
    """The interpreter's launches return None: no fast path to take."""
    log = []

    class Kernel:
        def __getitem__(self, grid):
            return lambda *args, **options: log.append((args, options))

    launch = fast_launch.launcher(Kernel(), (1,), (5,), {"num_warps": 2})
    launch("a")
    launch("b")
    assert log == [(("a", 5), {"num_warps": 2}), (("b", 5), {"num_warps": 2})]


@pytest.mark.gpu
@pytest.mark.parametrize("kind", SPECS)
def test_on_the_gpu_a_repeat_call_skips_triton_binding_and_keeps_every_bit(kind, monkeypatch):
    """The fast path is taken on a real GPU (Triton 3.6 and 3.7 return the CompiledKernel from
    a launch), and its outputs equal those of the usual launch bit for bit."""
    import triton

    module = _load(kind, "_gpu")
    spec = SPECS[kind]
    gen = torch.Generator(device="cuda").manual_seed(0)
    args = spec.make_inputs(spec.gpu.smoke, torch.bfloat16, gen, torch.device("cuda"))
    first = module.kernel_fn(*args)  # the usual launch, which compiles
    jitted = [v for v in vars(module).values() if isinstance(v, triton.runtime.jit.JITFunction)]
    usual = []
    for fn in jitted:
        monkeypatch.setattr(
            fn, "run", lambda *a, _run=fn.run, **k: usual.append(1) or _run(*a, **k)
        )
    again = [module.kernel_fn(*args) for _ in range(3)]
    torch.cuda.synchronize()
    assert not usual, "a repeat call went through JITFunction.run"
    assert all(_same_bits(first, out) for out in again)
