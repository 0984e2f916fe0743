"""What the containment tests share: the sandbox this machine offers (and a mark to skip where
it offers none), the key they plant, and finding or killing processes by a mark on their
command line."""

from __future__ import annotations

import os
import signal
from pathlib import Path

import pytest

from autokernel.harness import containment

PLANTED_KEY = "sk-planted-containment-test"
DAEMON_MARK = "autokernel-escape-daemon"  # as in tests/faults/escape_setsid_daemon.py
REPO_ROOT = Path(__file__).resolve().parents[1]

AVAILABLE = containment.probe()
needs_sandbox = pytest.mark.skipif(
    AVAILABLE.kind == containment.NONE, reason=f"no containment here: {AVAILABLE.reason}"
)


def processes_with(mark: str) -> list[int]:
    pids = []
    for pid in os.listdir("/proc"):
        try:
            if pid.isdigit() and mark.encode() in Path(f"/proc/{pid}/cmdline").read_bytes():
                pids.append(int(pid))
        except OSError:
            continue
    return pids


def kill_all(mark: str) -> None:
    for pid in processes_with(mark):
        try:
            os.kill(pid, signal.SIGKILL)
        except OSError:
            pass
