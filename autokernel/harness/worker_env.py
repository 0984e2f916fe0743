"""The environment an evaluation worker starts with: the parent's, minus anything that looks
like a credential (API keys must never reach candidate code), with our package importable and
torch's bytecode cached where the image ships none."""

from __future__ import annotations

import functools
import os
import re
import sys
from pathlib import Path

import torch

from autokernel.cache import cache_dir

SECRET_ENV = re.compile(r"KEY|TOKEN|SECRET|PASSWORD|CREDENTIAL|AUTH", re.IGNORECASE)
TRITON_KEY_ENV = "AUTOKERNEL_TRITON_HASH"  # Triton's own install hash, computed by the parent
REPO_ROOT = Path(__file__).resolve().parents[2]


def worker_env() -> dict[str, str]:
    """The parent's environment minus anything that looks like a credential: API keys must never
    reach candidate code."""
    env = {k: v for k, v in os.environ.items() if not SECRET_ENV.search(k)}
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO_ROOT), env.get("PYTHONPATH")]))
    env["PYTHONUNBUFFERED"] = "1"
    if ships_no_bytecode(torch.__file__):
        # Every experiment starts a fresh worker, and without bytecode each one compiled
        # torch's sources again: a spare took ~10 s to start on the H200 image we use (3.5 s
        # with bytecode, measured on a CPU box). It is written once into our own cache, never
        # beside the user's files.
        env.pop("PYTHONDONTWRITEBYTECODE", None)
        env.setdefault("PYTHONPYCACHEPREFIX", str(cache_dir() / "pycache"))
    if torch.cuda.is_available():
        digest = _triton_key()
        if digest:
            env[TRITON_KEY_ENV] = digest
    return env


@functools.cache
def _triton_key() -> str:
    """Triton's cache key of its own installation (a hash of libtriton and its compiler's
    sources), or "" where this Triton has no such function. Every worker on a GPU needs it
    before its first cache lookup, and hashing the 100 MB library took 0.5-0.8 s of each
    worker's start-up; the parent runs the same installation, so it hashes once a night."""
    try:
        from triton.runtime.cache import triton_key

        return str(triton_key())
    except Exception:  # private API in some Triton version: only a missed saving
        return ""


def install_triton_key() -> None:
    """In a worker: answer Triton's installation key with the parent's (TRITON_KEY_ENV)
    instead of hashing the library again. Set before any candidate code runs."""
    digest = os.environ.get(TRITON_KEY_ENV)
    if not digest:
        return
    try:
        import triton.runtime.autotuner as autotuner
        import triton.runtime.cache as cache
    except ImportError:
        return
    for module in (cache, autotuner):
        if hasattr(module, "triton_key"):
            module.triton_key = lambda: digest


def ships_no_bytecode(module_file: str) -> bool:
    """Whether a module was installed without its compiled bytecode (read-only or
    --no-compile images). Where it has it, a cache of our own would only be slower."""
    path = Path(module_file)
    pyc = path.parent / "__pycache__" / f"{path.stem}.{sys.implementation.cache_tag}.pyc"
    return not pyc.exists()
