"""One `autokernel run` per workspace at a time: an exclusive lock on .autokernel/run.lock.

Two runs on one workspace interleave their commits, rows and state and leave all three corrupt.
The lock is fcntl.flock on an open file: the kernel drops it when the holder exits however it
dies (kill -9 included), so a stale lock file never blocks the next run. The file holds the
holder's pid only so that the refusal can name it.
"""

from __future__ import annotations

import fcntl
import os
from pathlib import Path

from autokernel.run import layout

LOCK_FILE = layout.RUN_LOCK


class LockError(Exception):
    """Another live process holds the workspace; the message names its pid."""


class RunLock:
    """Held from acquire() until release() or the process's exit."""

    def __init__(self, root: Path) -> None:
        self.path = Path(root) / LOCK_FILE
        self._fd: int | None = None

    def acquire(self) -> RunLock:
        """Take the lock or raise LockError at once (never waits: a night's run would block)."""
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
        except OSError as exc:
            raise LockError(f"cannot create {self.path}: {exc}; fix the permissions") from None
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            holder = os.pread(fd, 32, 0).decode("ascii", "replace").strip() or "unknown"
            os.close(fd)
            raise LockError(
                f"another autokernel run (pid {holder}) is using {self.path.parents[1]}; wait "
                "for it to end or stop it (Ctrl-C), then try again"
            ) from None
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
        self._fd = fd
        return self

    def release(self) -> None:
        if self._fd is not None:
            os.close(self._fd)  # closing drops the flock; the file stays for the next run
            self._fd = None
