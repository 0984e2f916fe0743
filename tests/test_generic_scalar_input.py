"""Generic starters for regions with 0-dim inputs: Inductor's wrapper unwraps a 0-dim CPU tensor
with .item() at the launch, which the static guard refuses in any kernel.py; the starter loads the
scalar in the kernel instead, and a candidate that reads it on the host is still refused."""

from __future__ import annotations

import pytest
import torch

from autokernel.harness.static_check import check_source
from autokernel.model.generic_starter import starter_for
from autokernel.model.inductor_code import ArgSource, InductorCode
from autokernel.model.starter import StarterError, build
from autokernel.specs.generic import generic_spec
from tests.test_generic_starter import CUDA_WRAPPER, judged, load


def scalar_wrapper(signature: bool = True, item: str = "arg2_1.item()") -> str:
    """CUDA_WRAPPER as Inductor writes it for a 0-dim CPU input beside CUDA tensors: the
    scalar unwrapped with .item() at the launch, typed in the kernel's signature."""
    wrapper = CUDA_WRAPPER.replace("'out_ptr0': '*fp32'", "'in_ptr1': 'fp32', 'out_ptr0': '*fp32'")
    if not signature:
        wrapper = wrapper.replace("triton_meta={'signature'", "triton_meta={'no_signature'")
    wrapper = wrapper.replace("(in_ptr0, out_ptr0, xnumel", "(in_ptr0, in_ptr1, out_ptr0, xnumel")
    wrapper = wrapper.replace(
        "libdevice.tanh(tmp1), xmask", "libdevice.tanh(tmp1) * in_ptr1, xmask"
    )
    wrapper = wrapper.replace("arg0_1, arg1_1 = args", "arg0_1, arg1_1, arg2_1 = args")
    return wrapper.replace(".run(arg1_1, buf0,", f".run(arg1_1, {item}, buf0,")


@pytest.mark.parametrize("signature", [True, False], ids=["typed", "untyped"])
def test_a_scalar_a_cuda_wrapper_unwraps_is_loaded_by_the_kernel(signature, tmp_path):
    """Typed as Inductor's signature says (else as the Python number .item() gives), and the
    .item() of anything but an input is no starter at all rather than one the guard refuses."""
    from autokernel.model.capture import capture

    x, s = torch.randn(4096), torch.tensor(0.5)
    r = capture(lambda x, s: torch.tanh(torch.relu(x)) * s, [x, s], "scaled")
    args = (ArgSource("size", 0, 0), ArgSource("tensor", 0), ArgSource("tensor", 1))
    source = build(r, InductorCode(scalar_wrapper(signature), args))
    assert check_source(source) == [] and ".item" not in source
    assert "in_ptr1 = tl.load(in_ptr1_scalar_ptr).to(tl.float32)" in source
    module = load(tmp_path, source)
    torch.testing.assert_close(module.kernel_fn(x, s), torch.tanh(torch.relu(x)) * s)
    with pytest.raises(StarterError, match="from no input"):
        build(r, InductorCode(scalar_wrapper(signature, "buf0.item()"), args))


# Scalars a model passes as 0-dim tensors (a temperature, a step count, a flag): Inductor's
# wrapper unwraps a 0-dim CPU tensor with .item() at the kernel's launch.
SCALARS = {
    "float": (lambda x, s: x * s + 1, torch.tensor(0.5)),
    "int": (lambda x, s: x * s + 1, torch.tensor(3)),
    "bool": (lambda x, s: torch.where(s, x, -x), torch.tensor(True)),
}


def scalar_region(name: str):
    from autokernel.model.capture import capture

    fn, s = SCALARS[name]
    x = torch.randn(6, 40, generator=torch.Generator().manual_seed(0))
    return capture(fn, [x, s], f"scaled_{name}")


@pytest.mark.parametrize("name", SCALARS)
def test_a_zero_dim_input_is_loaded_in_the_kernel_not_read_by_item(name, tmp_path):
    """The starter of a region with a 0-dim CPU tensor input called .item() on it, as
    Inductor's wrapper does, and the static guard refused the product's own starter. The
    kernel takes the tensor and loads the scalar itself; kernel_fn reads no element."""
    r = scalar_region(name)
    source = starter_for(r.to_dict(), torch.device("cpu"))
    assert check_source(source) == [] and ".item" not in source
    module = load(tmp_path, source)
    spec = generic_spec(r.to_dict())
    dtype = spec.dtypes[0]
    atol, rtol = spec.tolerance(dtype)
    for seed, size in enumerate((spec.cpu.smoke, spec.cpu.sweep[1])):
        gen = torch.Generator().manual_seed(seed)
        args = spec.make_inputs(size, dtype, gen, torch.device("cpu"))
        got = module.kernel_fn(*args)
        want = spec.reference(*[a.double() if a.is_floating_point() else a for a in args])
        torch.testing.assert_close(got.double(), want, rtol=rtol, atol=atol)


@pytest.mark.slow
def test_a_scalar_input_starter_passes_the_five_stages(tmp_path):
    r = scalar_region("float")
    verdict = judged(r, starter_for(r.to_dict(), torch.device("cpu")), tmp_path, timing=False)
    assert verdict.status.value == "PASS", verdict.message
    assert [s.name for s in verdict.stages if s.status == "PASS"] == [
        "smoke", "sweep", "adversarial", "determinism", "odd_sizes"
    ]  # fmt: skip


CHEAT = """
import torch
import triton
import triton.language as tl

KERNEL_TYPE = "generic"
BACKEND = "triton"


@triton.jit
def _scale(x_ptr, out_ptr, s, n, BLOCK: tl.constexpr):
    i = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(out_ptr + i, tl.load(x_ptr + i, i < n) * s + 1, i < n)


def kernel_fn(x0, x1):
    out = torch.empty_like(x0)
    _scale[(triton.cdiv(x0.numel(), 256),)](x0, out, READ, x0.numel(), BLOCK=256)
    return out
"""


@pytest.mark.parametrize("read", ["x1.item()", "float(x1)"])
def test_a_candidate_that_reads_the_scalar_on_the_host_is_still_rejected(read, tmp_path):
    """Loading the scalar in the kernel leaves the guard as strict as it was: reading an input's
    value in kernel_fn (a sync on a GPU) is refused by name, or recorded when it runs."""
    r = scalar_region("float")
    verdict = judged(r, CHEAT.replace("READ", read), tmp_path, timing=False, quick=True)
    assert verdict.status.value == "REJECTED", verdict.message
    assert "item" in verdict.message or "_local_scalar_dense" in verdict.message, verdict.message
