"""Loading a compiled CUDA kernel (a cubin) and launching it, through the CUDA driver API.

Why the driver and not a torch extension: the builder compiles the candidate's source for the
device alone, so nothing of it runs on the host, and the module is loaded into the context torch
already uses (its primary context) with cuModuleLoadData, then launched with cuLaunchKernel on
torch's current stream. libcuda ships with every NVIDIA driver, so this needs no package beyond
torch, and ctypes is in the standard library.

Launch cost: each kernel keeps one ctypes slot per parameter and one argument array pointing at
them, so a call writes the slots and makes one foreign call (no per-call allocation).
"""

from __future__ import annotations

import ctypes
import ctypes.util
import functools
from collections.abc import Sequence

import torch

from autokernel.harness.cuda_source import EntryPoint

# CUfunction_attribute values (cuda.h)
ATTR_MAX_THREADS = 0
ATTR_STATIC_SHARED = 1
ATTR_LOCAL_BYTES = 3
ATTR_NUM_REGS = 4
ATTR_MAX_DYNAMIC_SHARED = 8
# Static plus dynamic shared memory above this needs an opt-in (cuFuncSetAttribute): a kernel
# with a 128 B static array and SMEM_KB 48 of dynamic stash was refused ("invalid argument").
DEFAULT_SHARED_LIMIT = 48 * 1024

_SLOT_TYPES = {
    "P": ctypes.c_void_p, "i": ctypes.c_int32, "I": ctypes.c_uint32, "q": ctypes.c_int64,
    "Q": ctypes.c_uint64, "f": ctypes.c_float, "d": ctypes.c_double, "?": ctypes.c_bool,
}  # fmt: skip


class CudaLaunchError(RuntimeError):
    """The driver refused a load or a launch (bad launch shape, too much shared memory...)."""


@functools.cache
def _lib() -> ctypes.CDLL:
    try:  # the driver's soname first: find_library may start a compiler to look
        lib = ctypes.CDLL("libcuda.so.1")
    except OSError:
        try:
            lib = ctypes.CDLL(ctypes.util.find_library("cuda") or "libcuda.so")
        except OSError as exc:
            raise CudaLaunchError(f"the CUDA driver library is not loadable here: {exc}") from None
    p, i, u = ctypes.c_void_p, ctypes.c_int, ctypes.c_uint
    sigs = {
        "cuInit": [u],
        "cuCtxGetCurrent": [ctypes.POINTER(p)],
        "cuCtxSetCurrent": [p],
        "cuDeviceGet": [ctypes.POINTER(i), i],
        "cuDevicePrimaryCtxRetain": [ctypes.POINTER(p), i],
        "cuModuleLoadData": [ctypes.POINTER(p), ctypes.c_char_p],
        "cuModuleGetFunction": [ctypes.POINTER(p), p, ctypes.c_char_p],
        "cuFuncGetAttribute": [ctypes.POINTER(i), i, p],
        "cuFuncSetAttribute": [p, i, i],
        "cuLaunchKernel": [p, u, u, u, u, u, u, u, p, ctypes.POINTER(p), ctypes.POINTER(p)],
        "cuGetErrorString": [i, ctypes.POINTER(ctypes.c_char_p)],
    }
    for fname, argtypes in sigs.items():
        fn = getattr(lib, fname)
        fn.argtypes, fn.restype = argtypes, ctypes.c_int
    return lib


def _check(code: int, what: str) -> None:
    if code == 0:
        return
    text = ctypes.c_char_p()
    _lib().cuGetErrorString(code, ctypes.byref(text))
    name = text.value.decode() if text.value else f"CUresult {code}"
    raise CudaLaunchError(f"{what}: {name}")


def _context(device: int) -> None:
    """Make torch's primary context of `device` current on this thread (torch creates it)."""
    torch.cuda.init()
    torch.zeros(1, device=f"cuda:{device}")  # makes sure torch made its context current
    lib = _lib()
    _check(lib.cuInit(0), "cuInit")
    ctx = ctypes.c_void_p()
    _check(lib.cuCtxGetCurrent(ctypes.byref(ctx)), "cuCtxGetCurrent")
    if not ctx.value:
        dev = ctypes.c_int()
        _check(lib.cuDeviceGet(ctypes.byref(dev), device), "cuDeviceGet")
        _check(lib.cuDevicePrimaryCtxRetain(ctypes.byref(ctx), dev), "cuDevicePrimaryCtxRetain")
        _check(lib.cuCtxSetCurrent(ctx), "cuCtxSetCurrent")


class Kernel:
    """One entry point of a loaded module: kernel(grid, block, *args, shared=0) launches it on
    torch's current stream. grid and block are ints or tuples of up to three ints; pointer
    parameters take CUDA tensors (their data pointer) or None."""

    __slots__ = ("_args", "_device", "_fn", "_kinds", "_name", "_opted", "_slots", "_stream")

    def __init__(self, fn: ctypes.c_void_p, entry: EntryPoint, device: int) -> None:
        self._fn, self._name, self._device = fn, entry.name, device
        self._kinds = entry.params
        self._slots = [_SLOT_TYPES[k]() for k in entry.params]
        n = len(self._slots)
        self._args = (ctypes.c_void_p * max(n, 1))(
            *[ctypes.cast(ctypes.pointer(s), ctypes.c_void_p) for s in self._slots]
        )
        self._stream = torch._C._cuda_getCurrentRawStream
        # dynamic bytes a launch may ask for without opting in: what the static arrays leave
        self._opted = DEFAULT_SHARED_LIMIT - self.attribute(ATTR_STATIC_SHARED)

    def attribute(self, which: int) -> int:
        value = ctypes.c_int()
        _check(_lib().cuFuncGetAttribute(ctypes.byref(value), which, self._fn), "attribute")
        return value.value

    @property
    def num_regs(self) -> int:
        return self.attribute(ATTR_NUM_REGS)

    @property
    def local_bytes(self) -> int:
        """Local memory per thread: register spills and stack arrays the compiler could not
        keep in registers."""
        return self.attribute(ATTR_LOCAL_BYTES)

    @property
    def max_threads(self) -> int:
        return self.attribute(ATTR_MAX_THREADS)

    def __call__(self, grid, block, *args, shared: int = 0) -> None:
        if len(args) != len(self._slots):
            raise TypeError(f"kernel {self._name} takes {len(self._slots)} arguments after grid "
                            f"and block, got {len(args)}")  # fmt: skip
        for slot, kind, value in zip(self._slots, self._kinds, args, strict=True):
            if kind == "P":
                if value is None:
                    slot.value = None
                elif isinstance(value, torch.Tensor):
                    if not value.is_cuda:
                        raise TypeError(f"kernel {self._name}: a pointer argument is a tensor "
                                        f"on {value.device}; pass CUDA tensors")  # fmt: skip
                    slot.value = value.data_ptr()
                else:
                    raise TypeError(f"kernel {self._name}: pointer arguments take CUDA tensors "
                                    f"or None, got {type(value).__name__}")  # fmt: skip
            else:
                slot.value = value
        g = _dims(grid)
        b = _dims(block)
        if shared > self._opted:
            _check(_lib().cuFuncSetAttribute(self._fn, ATTR_MAX_DYNAMIC_SHARED, shared),
                   f"kernel {self._name}: {shared} bytes of dynamic shared memory")  # fmt: skip
            self._opted = shared
        stream = self._stream(self._device)
        code = _lib().cuLaunchKernel(
            self._fn, g[0], g[1], g[2], b[0], b[1], b[2], shared, stream, self._args, None
        )
        if code:
            _check(code, f"launch of {self._name} with grid {g}, block {b}, {shared} B shared")


def _dims(value) -> tuple[int, int, int]:
    if isinstance(value, int):
        return (value, 1, 1)
    dims = tuple(int(v) for v in value)
    if not 1 <= len(dims) <= 3:
        raise TypeError(f"launch dimensions need 1 to 3 numbers, got {value!r}")
    return (*dims, 1, 1)[:3]  # type: ignore[return-value]


class CudaModule:
    """A loaded cubin: its `extern "C" __global__` kernels as attributes."""

    __slots__ = ("_kernels",)

    def __init__(self, kernels: dict[str, Kernel]) -> None:
        self._kernels = kernels

    def __getattr__(self, name: str) -> Kernel:
        try:
            return self._kernels[name]
        except KeyError:
            known = ", ".join(sorted(self._kernels)) or "none"
            raise AttributeError(f"no kernel {name!r} in the CUDA source (its extern \"C\" "
                                 f"__global__ kernels: {known})") from None  # fmt: skip

    def kernel_names(self) -> list[str]:
        return sorted(self._kernels)


def load_module(image: bytes, entries: Sequence[EntryPoint], device: int) -> CudaModule:
    """Load the cubin into torch's context on `device` and look up each entry point."""
    _context(device)
    lib = _lib()
    module = ctypes.c_void_p()
    _check(lib.cuModuleLoadData(ctypes.byref(module), image), "loading the compiled module")
    kernels = {}
    for entry in entries:
        fn = ctypes.c_void_p()
        _check(lib.cuModuleGetFunction(ctypes.byref(fn), module, entry.name.encode()),
               f"kernel {entry.name}")  # fmt: skip
        kernels[entry.name] = Kernel(fn, entry, device)
    return CudaModule(kernels)
