"""Per-machine cache directory and atomic JSON files (ceilings, baseline timings)."""

from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path
from typing import Any

from autokernel.secrets import redact


def cache_dir() -> Path:
    """AUTOKERNEL_CACHE_DIR, else ~/.cache/autokernel: shared by every run on this machine."""
    path = Path(os.environ.get("AUTOKERNEL_CACHE_DIR") or Path.home() / ".cache" / "autokernel")
    path.mkdir(parents=True, exist_ok=True)
    return path


def read_json(path: Path) -> dict[str, Any]:
    """The file's object, or {} when missing or unreadable (a cache may always be rebuilt)."""
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def write_json_atomic(path: Path, data: dict[str, Any]) -> None:
    """Write to a temporary file in the same folder, fsync, rename: never a torn file."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=path.name, suffix=".tmp")
    try:
        with os.fdopen(fd, "w") as f:
            f.write(redact(json.dumps(data, indent=1, sort_keys=True)))  # state.json too
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
