"""The CUDA starters on a GPU, in this process: each kernel_fn against reference.py on awkward
shapes in every dtype, views with other strides and offsets, and the builder's cache. (The
five-stage verdicts come from benchmarks/cuda_backend.py, which runs the sandboxed harness.)"""

from __future__ import annotations

import importlib.util
import time
from pathlib import Path

import pytest
import torch

from autokernel import cuda_build, reference
from autokernel.harness.guards import literal_assignment
from autokernel.specs import DTYPES, TOLERANCES

pytestmark = pytest.mark.gpu
CUDA_DIR = Path(__file__).resolve().parents[1] / "kernels" / "cuda"


def _starter(kind: str):
    spec = importlib.util.spec_from_file_location(f"cuda_{kind}", CUDA_DIR / f"{kind}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.kernel_fn


def _check(kind: str, *args) -> None:
    got = _starter(kind)(*args)
    want = getattr(reference, kind)(
        *(a.double() if torch.is_tensor(a) and a.is_floating_point() else a for a in args)
    )
    dtype = args[0].dtype
    assert got.shape == want.shape and got.dtype == getattr(reference, kind)(*args).dtype
    atol, rtol = TOLERANCES[dtype]
    assert torch.allclose(got.double(), want, atol=atol, rtol=rtol), (
        f"{kind} {tuple(args[0].shape)} {dtype}: max err {(got.double() - want).abs().max():.3g}"
    )


ROWS = [(1, 8), (3, 1000), (7, 1023), (257, 50257), (16, 131072), (4097, 1537), (2, 3, 64)]


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("shape", ROWS, ids=str)
@pytest.mark.parametrize("kind", ["rmsnorm", "layernorm", "softmax", "reduce"])
def test_rowwise_starters_match_the_reference(kind, shape, dtype):
    x = torch.randn(shape, device="cuda").to(dtype)
    cols = shape[-1]
    w = (1 + 0.1 * torch.randn(cols, device="cuda")).to(dtype)
    b = (0.1 * torch.randn(cols, device="cuda")).to(dtype)
    args = {"rmsnorm": (x, w, 1e-6), "layernorm": (x, w, b, 1e-5), "softmax": (x,), "reduce": (x,)}
    _check(kind, *args[kind])


@pytest.mark.parametrize("kind", ["rmsnorm", "layernorm", "softmax", "reduce"])
def test_rowwise_starters_take_views_at_odd_offsets(kind):
    base = torch.randn(64, 1001, device="cuda", dtype=torch.bfloat16)
    x = base[:, 1:]  # rows 2 bytes past each 16-byte boundary, and a row stride of 1001
    w = torch.ones(1000, device="cuda", dtype=torch.bfloat16)
    b = torch.zeros(1000, device="cuda", dtype=torch.bfloat16)
    args = {"rmsnorm": (x, w, 1e-6), "layernorm": (x, w, b, 1e-5), "softmax": (x,), "reduce": (x,)}
    _check(kind, *args[kind])


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("kind", ["rmsnorm", "layernorm"])
def test_norm_weights_off_a_16_byte_boundary_are_read_at_each_row_offset(kind, dtype):
    """Rows of 50257 start at every offset from a 16-byte boundary; the weight and bias, here
    views one element in, are read shifted by that offset."""
    x = torch.randn(24, 50257, device="cuda").to(dtype)
    w = (1 + 0.1 * torch.randn(50258, device="cuda")).to(dtype)[1:]
    b = (0.1 * torch.randn(50258, device="cuda")).to(dtype)[1:]
    _check(kind, *{"rmsnorm": (x, w, 1e-6), "layernorm": (x, w, b, 1e-5)}[kind])


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("shape", [(1, 32000), (64, 1000), (1023, 1537), (3, 50257)], ids=str)
def test_cross_entropy_matches_the_reference(shape, dtype):
    logits = (2 * torch.randn(shape, device="cuda")).to(dtype)
    targets = torch.randint(0, shape[1], (shape[0],), device="cuda")
    targets[1::3] = reference.IGNORE_INDEX
    _check("cross_entropy", logits, targets)


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("shape", [(1, 1, 1, 128), (2, 5, 1537, 64), (1, 7, 33, 80)], ids=str)
def test_rotary_matches_the_reference_also_on_transposed_views(shape, dtype):
    b, h, s, d = shape
    x = torch.randn(b, s, h, d, device="cuda").to(dtype).transpose(1, 2)  # as q arrives
    pos = torch.arange(s, device="cuda", dtype=torch.float64)[:, None]
    freqs = pos / 10000 ** (torch.arange(0, d, 2, device="cuda", dtype=torch.float64) / d)
    emb = torch.cat((freqs, freqs), -1)
    _check("rotary_embedding", x, emb.cos().to(dtype), emb.sin().to(dtype))


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize(
    "mnk", [(1, 127, 63), (33, 65, 17), (77, 3000, 1000), (1023, 1537, 4097), (256, 256, 256)],
    ids=str,
)  # fmt: skip
def test_matmul_is_correct_for_every_shape(mnk, dtype):
    m, n, k = mnk
    a = torch.randn(m, k, device="cuda").to(dtype)
    b = (torch.randn(k, n, device="cuda") * k**-0.5).to(dtype)
    _check("matmul", a, b)


def _stores_nothing_outside(mnk, launch) -> None:
    """launch(mod, a, b, c, m, n, k) writes C = A @ B into c, a view with 8 canary columns on the
    right and canary rows below, as the kernel's own output would have other tensors around it:
    the canaries stay, and C is right."""
    spec = importlib.util.spec_from_file_location("cuda_matmul_raw", CUDA_DIR / "matmul.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    m, n, k = mnk
    a = torch.randn(m, k, device="cuda", dtype=torch.bfloat16)
    b = torch.randn(k, n, device="cuda", dtype=torch.bfloat16)
    buf = torch.full((m + 64, n + 8), 7.0, device="cuda", dtype=torch.bfloat16)
    c = buf[:m, :n]
    launch(mod, a, b, c, m, n, k)
    torch.cuda.synchronize()
    assert torch.all(buf[:, n:] == 7.0) and torch.all(buf[m:] == 7.0)
    want = (a.double() @ b.double()).to(torch.bfloat16)
    assert torch.allclose(c.double(), want.double(), atol=2e-2 * k**0.5, rtol=2e-2)


@pytest.mark.parametrize("mnk", [(130, 70, 64), (77, 3001, 1000), (5, 9, 17)], ids=str)
def test_matmul_stores_nothing_outside_its_output(mnk):
    """N % 16 != 0: the last column tile's stores are guarded (the method's reference
    implementation writes past the end there)."""

    def launch(mod, a, b, c, m, n, k):
        kernel = mod._KERNELS[(torch.bfloat16, k % 8 == 0, n % 8 == 0)]
        grid = -(-m // mod.CONFIG["BM"]) * -(-n // mod.CONFIG["BN"])
        kernel(grid, mod._THREADS, a, b, c, m, n, k, k, n, n + 8, shared=mod._SHARED)

    _stores_nothing_outside(mnk, launch)


@pytest.mark.parametrize("mnk", [(130, 72, 64), (77, 3008, 1000), (5, 8, 24), (300, 520, 4104)],
                         ids=str)  # fmt: skip
def test_matmul_wgmma_stores_nothing_outside_its_output(mnk):
    """The Hopper path alone (rows 16-byte aligned, any M, N % 16 != 0, K % 64 != 0)."""
    if torch.cuda.get_device_capability() != (9, 0):
        pytest.skip("the wgmma path is built for sm_90a only")

    def launch(mod, a, b, c, m, n, k):
        grid = -(-m // mod._HBM) * -(-n // 256)
        mod._WG[torch.bfloat16](grid, mod._HTHREADS, a, b, c, m, n, k, k, n, n + 8,
                                shared=mod._HSHARED)  # fmt: skip

    _stores_nothing_outside(mnk, launch)


def test_a_cached_build_loads_in_under_a_second():
    text = (CUDA_DIR / "softmax.py").read_text()
    source, config = literal_assignment(text, "CUDA_SOURCE"), literal_assignment(text, "CONFIG")
    cuda_build.load(source, config)
    t0 = time.perf_counter()
    cuda_build.load(source, config)
    assert time.perf_counter() - t0 < 1.0
    assert cuda_build.builds()[-1]["cached"] is True
