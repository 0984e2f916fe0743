"""The environment an evaluation worker starts with: the parent's, minus anything that looks
like a credential (API keys must never reach candidate code), with our package importable and
torch's bytecode cached where the image ships none."""

from __future__ import annotations

import os
import re
import sys
from pathlib import Path

import torch

from autokernel.cache import cache_dir

SECRET_ENV = re.compile(r"KEY|TOKEN|SECRET|PASSWORD|CREDENTIAL|AUTH", re.IGNORECASE)
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
    return env


def ships_no_bytecode(module_file: str) -> bool:
    """Whether a module was installed without its compiled bytecode (read-only or
    --no-compile images). Where it has it, a cache of our own would only be slower."""
    path = Path(module_file)
    pyc = path.parent / "__pycache__" / f"{path.stem}.{sys.implementation.cache_tag}.pyc"
    return not pyc.exists()
