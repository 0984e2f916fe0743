"""The builder of BACKEND = "cuda" kernels: kernel.py's CUDA source, compiled and loaded.

kernel.py calls `load(CUDA_SOURCE, CONFIG)` and gets its `extern "C" __global__` kernels back
as attributes, each launched as `kernel(grid, block, *args, shared=0)` on torch's current
stream (cuda_driver.py). What this module decides, not the candidate:

- the compiler and its flags: nvcc, device code only (`-cubin`, nothing of the source runs on
  the host), for this GPU's own architecture (sm_90a on Hopper: wgmma and setmaxnreg need the
  "a" target), -O3, C++17; CONFIG's entries become `-D` defines (strings as NAME_value);
- that the source passes the C++ guard (harness/cuda_check.py) right here, whoever calls;
- the cache: cache_dir()/cuda/<sha256 of source, flags, defines, nvcc, arch, torch and CUDA
  versions>.cubin, written by rename under an fcntl lock, so two processes building the same
  kernel compile it once and never read half a file. cache_dir() is per sandbox root: a build
  made inside the evaluation sandbox is never loaded by the user's own process, which builds
  from the judged source in its own cache;
- a build failure raises CudaBuildError whose message is the compiler's first errors with
  their line numbers in CUDA_SOURCE, short enough for an agent to act on.
"""

from __future__ import annotations

import fcntl
import functools
import hashlib
import json
import math
import os
import re
import shutil
import subprocess
import tempfile
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import torch

from autokernel.atomic import write_atomic
from autokernel.cache import cache_dir
from autokernel.cubin import CubinError, device_global_bytes
from autokernel.cuda_driver import CudaModule, load_module
from autokernel.harness.cuda_check import check_cuda_source, tokenize
from autokernel.harness.cuda_source import SourceError, entry_points

NVCC_ENV = "AUTOKERNEL_NVCC"  # an nvcc to use instead of the one found
CUTLASS_ENV = "AUTOKERNEL_CUTLASS_DIR"  # a CUTLASS checkout: its include/ is added
BASE_FLAGS = ("-cubin", "-O3", "-std=c++17", "-lineinfo", "--expt-relaxed-constexpr")
COMPILE_TIMEOUT_S = 240.0  # below the evaluation's 300 s, so a runaway template is our message
MAX_ERRORS = 5  # the first errors are what an agent can fix; later ones mostly follow from them
MAX_MESSAGE = 2500  # characters of compiler output kept
SOURCE_NAME = "CUDA_SOURCE.cu"  # how compiler messages name the source
BUILDER_VERSION = "1"  # part of the cache key: a change of this module's flags invalidates
_IDENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_BUILDS: list[dict[str, Any]] = []  # this process's builds, for the verdict (builds())


class CudaBuildError(RuntimeError):
    """The source did not compile (message: the compiler's first errors), or cannot be built
    here (no GPU, no nvcc). The harness reports it as a FAIL of the first stage."""


class CudaSourceRefused(CudaBuildError):
    """The source failed the C++ guard (never compiled), or its image keeps state in device
    memory of its own (cubin.py): REJECTED, never loaded."""


def builds() -> list[dict[str, Any]]:
    """What this process built or loaded: key, cached, seconds (compile or load), for the
    verdict's compile time."""
    return [dict(b) for b in _BUILDS]


def load(source: str, config: Mapping[str, object] | None = None) -> CudaModule:
    """Compile (or take from the cache) and load the source; its kernels as attributes."""
    t0 = time.perf_counter()
    # Exact types only: a str or dict subclass could show the guard other text than nvcc gets
    # (its own replace(), items() or __str__).
    if type(source) is not str:
        raise CudaSourceRefused("CUDA source must be a plain string (the CUDA_SOURCE literal)")
    if config is not None and type(config) is not dict:
        raise CudaSourceRefused("CONFIG must be a plain dict literal")
    findings = check_cuda_source(source)
    if findings:
        raise CudaSourceRefused("; ".join(str(f) for f in findings[:10]))
    try:
        entries = entry_points(tokenize(source))
    except SourceError as exc:
        raise CudaBuildError(str(exc)) from None
    if not entries:
        raise CudaBuildError('the CUDA source has no extern "C" __global__ kernel to launch')
    device = _device()
    nvcc, flags = find_nvcc(), build_flags(config or {}, device)
    key = cache_key(source, flags, nvcc_version(nvcc))
    image, compile_s = _cached_or_built(key, source, nvcc, flags)
    refuse_device_state(image)
    module = load_module(image, entries, device)
    seconds = round(time.perf_counter() - t0, 3)
    _BUILDS.append({"key": key[:16], "cached": compile_s is None, "compile_s": compile_s,
                    "seconds": seconds})  # fmt: skip
    return module


def refuse_device_state(image: bytes) -> None:
    """CudaSourceRefused for an image with module-level device variables (cubin.py says why),
    CudaBuildError for one whose sections cannot be read."""
    try:
        held = device_global_bytes(image)
    except CubinError as exc:
        raise CudaBuildError(f"the compiled image cannot be read: {exc}") from None
    if held:
        raise CudaSourceRefused(
            f"the compiled kernel keeps {held} bytes in __device__, __managed__ or static "
            "variables, device memory that outlives every call and that the determinism "
            "stage cannot count: keep state (counters, scratch) in a tensor that kernel_fn "
            "allocates and passes; use __constant__ for read-only tables"
        )


def _device() -> int:
    if not torch.cuda.is_available():
        raise CudaBuildError(
            'BACKEND = "cuda" needs an NVIDIA GPU and this machine has none; use a Triton kernel'
        )
    return torch.cuda.current_device()


def build_flags(config: Mapping[str, object], device: int) -> list[str]:
    """nvcc's flags for this source's build on `device`: ours, the arch, CONFIG's defines."""
    arch = gpu_arch(torch.cuda.get_device_capability(device))
    return [*BASE_FLAGS, f"-arch={arch}", *include_flags(), *define_flags(config)]


def cached_cubin(source: str, config: Mapping[str, object] | None = None) -> Path:
    """Where load() keeps this source's cubin on this GPU (benchmarks delete it to time a cold
    build)."""
    nvcc = find_nvcc()
    flags = build_flags(config or {}, _device())
    return cache_dir() / "cuda" / f"{cache_key(source, flags, nvcc_version(nvcc))}.cubin"


def gpu_arch(capability: tuple[int, int]) -> str:
    """nvcc's -arch for a device: the arch-specific "a" target where one exists (9.0, 10.x,
    12.x), whose features (wgmma, setmaxnreg, tcgen05) the plain target lacks."""
    major, minor = capability
    suffix = "a" if major in (9, 10, 12) else ""
    return f"sm_{major}{minor}{suffix}"


def define_flags(config: Mapping[str, object]) -> list[str]:
    """-D flags for CONFIG: numbers and booleans as NAME=value, a string as NAME_value (test it
    with #ifdef). Anything else is refused: a define must not inject code."""
    flags = []
    for name, value in config.items():
        if type(name) is not str or not _IDENT.fullmatch(name) or name.startswith("__"):
            raise CudaSourceRefused(f"CONFIG key {name!r} cannot be a C++ macro name")
        if type(value) is bool:
            flags.append(f"-D{name}={int(value)}")
        elif type(value) is int:
            flags.append(f"-D{name}={value}")
        elif type(value) is float and math.isfinite(value):
            flags.append(f"-D{name}={value!r}")
        elif type(value) is str and _IDENT.fullmatch(value):
            flags.append(f"-D{name}_{value}=1")
        else:
            raise CudaSourceRefused(f"CONFIG[{name!r}] = {value!r}: a CUDA define takes an int, "
                                    "float, bool or identifier string")  # fmt: skip
    return flags


def include_flags() -> list[str]:
    root = os.environ.get(CUTLASS_ENV)
    if root and (Path(root) / "include" / "cute").is_dir():
        return [f"-I{Path(root) / 'include'}"]
    return []


def cache_key(source: str, flags: list[str], nvcc_ver: str) -> str:
    parts = {"source": source, "flags": flags, "nvcc": nvcc_ver, "torch": torch.__version__,
             "cuda": torch.version.cuda, "builder": BUILDER_VERSION}  # fmt: skip
    return hashlib.sha256(json.dumps(parts, sort_keys=True).encode()).hexdigest()


def find_nvcc() -> str:
    """AUTOKERNEL_NVCC, CUDA_HOME's or CUDA_PATH's, the one on PATH, /usr/local/cuda's, else
    the nvidia-cuda-nvcc wheel's; CudaBuildError when there is none."""
    candidates = [os.environ.get(NVCC_ENV)]
    for var in ("CUDA_HOME", "CUDA_PATH"):
        if os.environ.get(var):
            candidates.append(str(Path(os.environ[var]) / "bin" / "nvcc"))
    candidates += [shutil.which("nvcc"), "/usr/local/cuda/bin/nvcc", wheel_nvcc()]
    for path in candidates:
        if path and os.access(path, os.X_OK):
            return path
    raise CudaBuildError("no nvcc found: install the CUDA toolkit, or pip install "
                         "nvidia-cuda-nvcc, or set AUTOKERNEL_NVCC")  # fmt: skip


def wheel_nvcc() -> str | None:
    """nvcc of the nvidia-cuda-nvcc wheel (nvidia/cu13/bin, or cuda_nvcc/bin for CUDA 12)."""
    try:
        import nvidia
    except ImportError:
        return None
    for root in getattr(nvidia, "__path__", []):
        for sub in ("cu13/bin/nvcc", "cuda_nvcc/bin/nvcc"):
            if (Path(root) / sub).exists():
                return str(Path(root) / sub)
    return None


@functools.cache
def nvcc_version(nvcc: str) -> str:
    """'13.0.88'-style release of this nvcc (the "V..." of nvcc --version)."""
    try:
        out = subprocess.run([nvcc, "--version"], capture_output=True, text=True, timeout=60)
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise CudaBuildError(f"{nvcc} --version failed: {exc}") from None
    m = re.search(r"\bV(\d+\.\d+\.\d+)", out.stdout)
    return m.group(1) if m else out.stdout.strip()[-80:]


def _cached_or_built(
    key: str, source: str, nvcc: str, flags: list[str]
) -> tuple[bytes, float | None]:
    """The cubin of `key` and the seconds its compile took (None: it came from the cache)."""
    folder = cache_dir() / "cuda"
    folder.mkdir(parents=True, exist_ok=True)
    cubin = folder / f"{key}.cubin"
    try:
        return cubin.read_bytes(), None
    except FileNotFoundError:
        pass
    with open(folder / f"{key}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # another process may be building the same key
        try:
            return cubin.read_bytes(), None
        except FileNotFoundError:
            pass
        t0 = time.perf_counter()
        image = compile_cubin(source, nvcc, flags)
        compile_s = round(time.perf_counter() - t0, 3)
        write_atomic(cubin, image)
    return image, compile_s


def compile_cubin(source: str, nvcc: str, flags: list[str]) -> bytes:
    """nvcc the source to a cubin in a private temporary folder; CudaBuildError with the
    compiler's first errors when it fails."""
    with tempfile.TemporaryDirectory(prefix="autokernel-nvcc-") as tmp:
        src = Path(tmp) / SOURCE_NAME
        src.write_text(source)
        out = Path(tmp) / "kernel.cubin"
        argv = [nvcc, *flags, "-o", str(out), SOURCE_NAME]
        try:
            done = subprocess.run(argv, cwd=tmp, capture_output=True, text=True,
                                  timeout=COMPILE_TIMEOUT_S)  # fmt: skip
        except subprocess.TimeoutExpired:
            raise CudaBuildError(f"nvcc did not finish within {COMPILE_TIMEOUT_S:g} s") from None
        except OSError as exc:
            raise CudaBuildError(f"nvcc could not be started: {exc}") from None
        if done.returncode != 0 or not out.exists():
            raise CudaBuildError(trim_errors(done.stdout + done.stderr, tmp))
        return out.read_bytes()


_ERROR = re.compile(
    r"\(\d+\): (?:catastrophic )?error\b|^(?:ptxas|nvcc|nvlink)\b.*\b(?:error|fatal)\b|"
    r"\bfatal error\b|^error\b",
    re.IGNORECASE,
)
_LOCATED = re.compile(re.escape(SOURCE_NAME) + r"\((\d+)\): ")


def trim_errors(output: str, tmp: str = "") -> str:
    """The compiler's first MAX_ERRORS errors, each with the source line and caret nvcc prints
    under it, and `CUDA_SOURCE.cu(12): error: ...` as `line 12: error: ...`; warnings dropped."""
    text = output.replace(tmp + "/", "") if tmp else output
    lines = text.splitlines()
    kept: list[str] = []
    errors = 0
    i = 0
    while i < len(lines):
        line = lines[i]
        if _ERROR.search(line):
            errors += 1
            if errors <= MAX_ERRORS:
                kept.append(_LOCATED.sub(lambda m: f"line {m.group(1)}: ", line).strip())
                # nvcc shows the offending source line and a caret under it
                for follow in lines[i + 1 : i + 3]:
                    if follow.strip() and not _LOCATED.match(follow) and not _ERROR.search(follow):
                        kept.append(follow.rstrip())
        i += 1
    if not kept:
        kept = [ln.strip() for ln in lines if ln.strip()][-MAX_ERRORS:] or ["nvcc failed"]
    if errors > MAX_ERRORS:
        kept.append(f"(and {errors - MAX_ERRORS} more errors)")
    message = "nvcc: " + "\n".join(kept)
    return message[:MAX_MESSAGE]
