"""Per-machine cache directory and atomic JSON files (ceilings, baseline timings)."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from autokernel.atomic import write_atomic
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
    """The JSON, redacted (state.json is written here too), replacing `path` atomically."""
    write_atomic(path, redact(json.dumps(data, indent=1, sort_keys=True)))
