"""The one way a kernel file is imported by its path: the sandboxed worker (the candidate), verify
and the API (a judged kernel), and the benchmarks (starters and variants) all come through here.

Before the file runs, the names it binds that Triton's interpreter would copy into it are bound
to None (harness/candidate_module.py says why: a candidate read the interpreter's `inspect`).

A kernel file is never put on sys.path or imported by a name another module could hold: each
caller gives a name of its own, and only a caller that must find the module again by name
(kernel_fn.__module__) registers it in sys.modules.
"""

from __future__ import annotations

import importlib.util
import inspect
import sys
from collections.abc import Callable
from pathlib import Path
from types import ModuleType

from autokernel.harness.candidate_module import seal


def import_file(path: Path, name: str, *, register: bool = False) -> ModuleType:
    """Execute the file at `path` as module `name`. ImportError when it is not a Python file;
    whatever the file raises at import propagates (the caller says what it means)."""
    spec = importlib.util.spec_from_file_location(name, path)
    if spec is None or spec.loader is None:
        raise ImportError(f"{path}: not a Python file")
    module = importlib.util.module_from_spec(spec)
    try:
        source = Path(path).read_text()
    except (OSError, UnicodeDecodeError):
        source = ""  # exec_module reports it in its own words
    seal(vars(module), source)
    if register:
        sys.modules[name] = module
    try:
        spec.loader.exec_module(module)
    except BaseException:
        if register:
            sys.modules.pop(name, None)
        raise
    return module


def positional_limit(fn: Callable, wanted: int) -> int | None:
    """How many positional arguments fn takes, where that is fewer than `wanted`, else None: a
    kernel file written before its type gained an optional argument takes fewer."""
    try:
        params = inspect.signature(fn).parameters.values()
    except (TypeError, ValueError):
        return None
    kinds = [p.kind for p in params]
    if inspect.Parameter.VAR_POSITIONAL in kinds:
        return None
    positional = (inspect.Parameter.POSITIONAL_ONLY, inspect.Parameter.POSITIONAL_OR_KEYWORD)
    n = sum(k in positional for k in kinds)
    return n if n < wanted else None


def trimmed(fn: Callable, n: int) -> Callable:
    """fn called with the first n of the arguments it is given."""

    def call(*args):
        return fn(*args[:n])

    return call
