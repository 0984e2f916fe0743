"""A CUDA kernel may not keep state in device memory of its own module: a `__device__`,
`__managed__` or function-scope `static` variable outlives every call where the determinism
stage cannot count it, so a table of earlier outputs there would let a racy kernel replay them
and pass. The builder reads the compiled image and refuses it before it is loaded."""

from __future__ import annotations

import pytest
from cuda_helpers import nvcc_or_skip

from autokernel import cuda_build
from autokernel.cubin import device_global_bytes, sections
from autokernel.cuda_build import CudaBuildError, CudaSourceRefused

KERNEL = 'extern "C" __global__ void k(int* p) {{ {body} }}\n'
STATEFUL = {
    "a __device__ table": "__device__ int table[256];\n"
    + KERNEL.format(body="table[threadIdx.x] += p[0]; p[1] = table[0];"),
    "an initialized one": "__device__ int table[4] = {1, 2, 3, 4};\n"
    + KERNEL.format(body="table[threadIdx.x & 3] += p[0]; p[1] = table[0];"),
    "a const one": "__device__ const int table[4] = {1, 2, 3, 4};\n"
    + KERNEL.format(body="p[1] = table[p[0] & 3];"),
    "a static local": KERNEL.format(body="static int calls; calls += 1; p[1] = calls;"),
    "a __managed__ one": "__managed__ int seen;\n"
    + KERNEL.format(body="seen += p[0]; p[1] = seen;"),
}
STATELESS = {
    "__constant__": "__constant__ int table[4] = {1, 2, 3, 4};\n"
    + KERNEL.format(body="p[1] = table[p[0] & 3];"),
    "__shared__": KERNEL.format(
        body="__shared__ int s[32]; s[threadIdx.x & 31] = p[0]; __syncthreads(); p[1] = s[0];"
    ),
}
FLAGS = [*cuda_build.BASE_FLAGS, "-arch=sm_90a"]


def _image(source: str) -> bytes:
    return cuda_build.compile_cubin(source, nvcc_or_skip(), FLAGS)


@pytest.mark.parametrize("source", STATEFUL.values(), ids=STATEFUL.keys())
def test_state_in_device_memory_of_the_module_is_refused(source):
    image = _image(source)
    assert device_global_bytes(image) > 0
    with pytest.raises(CudaSourceRefused, match=r"keep state .* in a tensor that kernel_fn"):
        cuda_build.refuse_device_state(image)


@pytest.mark.parametrize("source", STATELESS.values(), ids=STATELESS.keys())
def test_constant_tables_and_shared_memory_are_not_state(source):
    image = _image(source)
    assert ".nv.constant0.k" in sections(image)  # the section table was read
    assert device_global_bytes(image) == 0
    cuda_build.refuse_device_state(image)


def test_load_refuses_the_image_before_loading_it(tmp_path, monkeypatch):
    """Through load(), as kernel.py builds: on a CPU machine with the GPU's flags."""
    nvcc_or_skip()
    monkeypatch.setenv("AUTOKERNEL_CACHE_DIR", str(tmp_path))
    monkeypatch.setattr(cuda_build, "_device", lambda: 0)
    monkeypatch.setattr(cuda_build, "build_flags", lambda config, device: FLAGS)
    monkeypatch.setattr(cuda_build, "find_nvcc", nvcc_or_skip)

    def never(*args):
        raise AssertionError("a refused image was loaded")

    monkeypatch.setattr(cuda_build, "load_module", never)
    with pytest.raises(CudaSourceRefused, match="bytes in __device__"):
        cuda_build.load(STATEFUL["a __device__ table"])
    with pytest.raises(CudaSourceRefused):  # from the cache, on the next import, all the same
        cuda_build.load(STATEFUL["a __device__ table"])


def test_an_image_that_is_not_elf_is_a_build_error():
    with pytest.raises(CudaBuildError, match="cannot be read"):
        cuda_build.refuse_device_state(b"cubin")
