"""Triton's cache for a candidate worker: reads the trusted cache, writes only its own.

Triton picks its cache class from TRITON_CACHE_MANAGER ("module:Class"); cache_tiers.py names
this one for candidate workers. A lookup tries the worker's private folder (TRITON_CACHE_DIR,
inside its work directory) and then the trusted cache (AUTOKERNEL_TRITON_READ_ONLY, mounted
read-only), so Triton's driver and launchers built by trusted workers are reused; everything
the worker compiles goes to the private folder and is gone with it.
"""

from __future__ import annotations

import json
import os

from triton.runtime.cache import FileCacheManager

READ_ONLY_ENV = "AUTOKERNEL_TRITON_READ_ONLY"  # cache_tiers.READ_ONLY_ENV (no import: Triton
# imports this module by name inside the worker, and it must stay free of torch)


class LayeredCache(FileCacheManager):
    """FileCacheManager whose lookups fall back to a read-only folder of the same layout."""

    def __init__(self, key: str, override: bool = False, dump: bool = False) -> None:
        super().__init__(key, override, dump)
        shared = os.environ.get(READ_ONLY_ENV, "")
        # Dump and override folders are Triton's debugging aids: no second layer for them.
        self.shared_dir = os.path.join(shared, key) if shared and not (override or dump) else ""

    def _shared(self, filename: str) -> str | None:
        if not self.shared_dir:
            return None
        path = os.path.join(self.shared_dir, filename)
        return path if os.path.exists(path) else None

    def get_file(self, filename: str) -> str | None:
        return super().get_file(filename) or self._shared(filename)

    def get_group(self, filename: str) -> dict[str, str] | None:
        own = super().get_group(filename)
        if own is not None:
            return own
        path = self._shared(f"__grp__{filename}")  # Triton's own name for a group's index
        if path is None:
            return None
        try:
            with open(path) as f:
                children = json.load(f)["child_paths"]
            return {c: p for c, p in children.items() if os.path.exists(p)}
        except (OSError, ValueError, KeyError, TypeError, AttributeError):
            return None  # a damaged entry is a miss, as in Triton's own manager
