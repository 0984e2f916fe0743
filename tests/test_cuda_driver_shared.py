"""The launcher's shared-memory opt-in, on the CPU with a stand-in for the driver: a launch
whose static and dynamic shared memory together pass the 48 KB default must opt in first (the
driver refuses it otherwise), so every SMEM_KB the search space allows launches."""

from __future__ import annotations

import ctypes

import pytest
import torch

from autokernel import cuda_driver
from autokernel.harness.cuda_source import EntryPoint

STATIC = 128  # a kernel's `__shared__ float red[32]`


class FakeDriver:
    """What cuLaunchKernel checks about shared memory, and nothing else."""

    def __init__(self) -> None:
        self.opted = 0
        self.launches: list[int] = []

    def cuFuncGetAttribute(self, out, which, fn) -> int:
        out._obj.value = {cuda_driver.ATTR_STATIC_SHARED: STATIC}.get(which, 0)
        return 0

    def cuFuncSetAttribute(self, fn, which, value) -> int:
        assert which == cuda_driver.ATTR_MAX_DYNAMIC_SHARED
        self.opted = value
        return 0

    def cuLaunchKernel(self, fn, gx, gy, gz, bx, by, bz, shared, stream, args, extra) -> int:
        limit = max(self.opted, cuda_driver.DEFAULT_SHARED_LIMIT - STATIC)
        if shared > limit:
            return 1  # CUDA_ERROR_INVALID_VALUE, as the driver answers
        self.launches.append(shared)
        return 0

    def cuGetErrorString(self, code, out) -> int:
        out._obj.value = b"invalid argument"
        return 0


@pytest.mark.parametrize("smem_kb", [0, 47, 48, 96, 192])
def test_static_plus_dynamic_shared_past_48_kb_opts_in_first(monkeypatch, smem_kb):
    fake = FakeDriver()
    monkeypatch.setattr(cuda_driver, "_lib", lambda: fake)
    monkeypatch.setattr(torch._C, "_cuda_getCurrentRawStream", lambda d: 0, raising=False)
    kernel = cuda_driver.Kernel(ctypes.c_void_p(1), EntryPoint("k", ("i",), 1), 0)
    kernel(1, 32, 7, shared=smem_kb * 1024)
    assert fake.launches == [smem_kb * 1024]
    assert (fake.opted > 0) == (smem_kb * 1024 + STATIC > cuda_driver.DEFAULT_SHARED_LIMIT)
