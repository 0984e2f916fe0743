"""The one way a file of ours is replaced: written whole to a temporary file on the same
filesystem, fsynced, renamed over the old one, and the rename itself fsynced. A reader, or a
`kill -9` mid-write, finds the old file or the new one, never half of one: state.json,
verdicts, plan.yaml, modes.json, the caches and kernel.py in the workspace all rely on it.
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

FILE_MODE = 0o644  # mkstemp makes 0600; the user reads these files too


def write_atomic(path: Path, data: str | bytes, tmp_dir: Path | None = None) -> None:
    """Replace `path` with `data` (str is written as UTF-8). The temporary file goes in
    `tmp_dir` (default: beside `path`), which must be on the same filesystem for the rename."""
    path = Path(path)
    folder = Path(tmp_dir) if tmp_dir is not None else path.parent
    path.parent.mkdir(parents=True, exist_ok=True)
    folder.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=folder, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data.encode("utf-8") if isinstance(data, str) else data)
            f.flush()
            os.fsync(f.fileno())
        os.chmod(tmp, FILE_MODE)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    dir_fd = os.open(path.parent, os.O_RDONLY)
    try:
        os.fsync(dir_fd)  # make the rename itself durable
    finally:
        os.close(dir_fd)
