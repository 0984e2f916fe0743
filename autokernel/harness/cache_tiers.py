"""Which compile caches a worker reads and writes, by how far its writer is trusted.

Why: a cache is code that its next reader runs. Triton loads compiled launchers (`.so` files:
native code) and kernel binaries from its cache by a key anyone can compute, Inductor unpickles
graphs from its own, and Python runs `.pyc` files from a pycache prefix without checking their
source. So a cache that candidate code can write must never be read by anything that trusts it:

- the user's own caches (Triton's `~/.triton/cache`, Inductor's folder in `/tmp`,
  `~/.cache/autokernel`) are never mounted into a worker. `verify` and `autokernel.api` run in
  the user's process and build kernels from source into those caches alone;
- the trusted sandbox cache (`cache_dir()/sandbox`) is written only by workers that never import
  candidate code (the baseline worker, trusted_baselines.py) and is mounted read-only into
  candidate workers: their imports, Triton's driver and the baselines stay warm;
- a candidate worker writes caches only inside its own work directory, removed with it. Nothing
  it writes is read by a later evaluation: a binary planted under the current best kernel's
  cache key would otherwise slow the best down in the next comparison, and a poisoned launcher
  would run in every later worker.

Without containment (AUTOKERNEL_SANDBOX=off, or no namespaces) the same paths are used, but
nothing enforces the read-only part: the candidate runs with the user's rights anyway.
"""

from __future__ import annotations

from pathlib import Path

from autokernel.cache import cache_dir

TRUSTED_DIR = "sandbox"  # under cache_dir(): written by trusted workers only
PRIVATE_DIR = "cache"  # under a candidate worker's work directory
LAYERED_MANAGER = "autokernel.harness.layered_cache:LayeredCache"
READ_ONLY_ENV = "AUTOKERNEL_TRITON_READ_ONLY"  # the trusted Triton cache a candidate reads
PYCACHE_ENV = "PYTHONPYCACHEPREFIX"
# Set by the parent or the user for their own processes; inside a worker the tier decides.
REPLACED = ("TRITON_CACHE_DIR", "TRITON_CACHE_MANAGER", "TORCHINDUCTOR_CACHE_DIR",
            "AUTOKERNEL_CACHE_DIR", READ_ONLY_ENV)  # fmt: skip


def trusted_root() -> Path:
    """The cache only trusted workers write; created on first use."""
    root = cache_dir() / TRUSTED_DIR
    for sub in ("triton", "inductor", "data", "pycache"):
        (root / sub).mkdir(parents=True, exist_ok=True)
    return root


def worker_env(env: dict[str, str], work: Path, trusted: bool) -> dict[str, str]:
    """env with every cache location set for a worker of this tier. A bytecode prefix is kept
    only where the parent asked for one (harness/worker_env.py: torch shipped without bytecode)."""
    root = trusted_root()
    out = {k: v for k, v in env.items() if k not in REPLACED}
    if trusted:
        out.update(
            TRITON_CACHE_DIR=str(root / "triton"),
            TORCHINDUCTOR_CACHE_DIR=str(root / "inductor"),
            AUTOKERNEL_CACHE_DIR=str(root / "data"),
        )
    else:
        private = work.resolve() / PRIVATE_DIR
        out.update(
            TRITON_CACHE_DIR=str(private / "triton"),
            TRITON_CACHE_MANAGER=LAYERED_MANAGER,
            TORCHINDUCTOR_CACHE_DIR=str(private / "inductor"),
            AUTOKERNEL_CACHE_DIR=str(private / "data"),
        )
        out[READ_ONLY_ENV] = str(root / "triton")
    if PYCACHE_ENV in env:
        out[PYCACHE_ENV] = str(root / "pycache")
    return out


def mounts(env: dict[str, str], work: Path, trusted: bool) -> tuple[list[Path], list[Path]]:
    """(writable, read-only) cache folders a contained worker of this tier needs: its own work
    directory always; the trusted cache writable for a trusted worker, else read-only."""
    root = trusted_root()
    shared = [root / "triton", root / "pycache"]
    if trusted:
        return [work.resolve(), *shared, root / "inductor", root / "data"], []
    for name in ("TRITON_CACHE_DIR", "TORCHINDUCTOR_CACHE_DIR", "AUTOKERNEL_CACHE_DIR"):
        if env.get(name):  # inside the work directory (worker_env); absent in bare probes
            Path(env[name]).mkdir(parents=True, exist_ok=True)
    return [work.resolve()], [p.resolve() for p in shared]
