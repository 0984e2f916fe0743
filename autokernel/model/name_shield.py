"""Keep the repository's top-level `kernels/` from standing in for Hugging Face's `kernels`.

The repository keeps its starters in a top-level `kernels/` folder, and whenever the checkout's
root is on sys.path (`python -m ...` or `python -m pytest` from the root, which put the current
folder first) that folder answers `import kernels`. transformers >= 5 imports Hugging Face's
`kernels` distribution wherever one is installed (its check reads the distribution's version,
then imports the name), so a model module built in such a process fails with
"cannot import name ... from 'kernels'". Importing the installed distribution first, with the
checkout's entries off sys.path, puts the right module in sys.modules for transformers to find;
our package never imports the top-level name (it uses autokernel.kernels).
"""

from __future__ import annotations

import importlib
import importlib.machinery
import os
import sys
from pathlib import Path

MARK = "AUTOKERNEL_STARTERS"  # defined in kernels/__init__.py


def _is_ours(init_file: str | os.PathLike | None) -> bool:
    """True when a package's __init__.py carries our mark (read, never imported)."""
    if not init_file:
        return False
    try:
        return MARK in Path(init_file).read_text(errors="replace")
    except OSError:
        return False


def _holds_ours(entry: str) -> bool:
    """True when this sys.path entry would resolve `kernels` to our starters."""
    return _is_ours(Path(entry or os.getcwd()) / "kernels" / "__init__.py")


def shield_kernels_name() -> str:
    """Make `kernels` in sys.modules the installed distribution where ours would shadow it.

    Returns what was done, for tests and logs: "installed" (the distribution was imported in
    ours' place), "absent" (nothing of that name is installed: transformers then finds ours,
    reads no version and treats hub kernels as unavailable, which is right), or "clear" (ours
    is not what `import kernels` finds).
    """
    loaded = sys.modules.get("kernels")
    if loaded is not None and not _is_ours(getattr(loaded, "__file__", None)):
        return "clear"
    if loaded is None:
        found = importlib.machinery.PathFinder.find_spec("kernels", sys.path)
        if found is None or not _is_ours(found.origin):
            return "clear"
    saved_path, saved_module = list(sys.path), sys.modules.pop("kernels", None)
    sys.path[:] = [e for e in sys.path if not (isinstance(e, str) and _holds_ours(e))]
    importlib.invalidate_caches()
    try:
        importlib.import_module("kernels")
        return "installed"
    except ImportError:
        sys.modules.pop("kernels", None)
        if saved_module is not None:
            sys.modules["kernels"] = saved_module
        return "absent"
    finally:
        sys.path[:] = saved_path
