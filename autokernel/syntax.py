"""Python's parser behind one lock: ast.parse from several threads is unsafe on CPython 3.11.

Why: the LLM agents of a parallel night parse their replies in threads while the driver parses
kernel files, and CPython 3.11 can then raise "SystemError: AST constructor recursion depth
mismatch" from a correct source (cpython gh-106905; seen here on 3.11.7 in the parallel loop's
tests). A lock costs nothing beside a parse, and every parse of ours goes through it.
"""

from __future__ import annotations

import ast
import threading

_LOCK = threading.Lock()


def parse(source: str, mode: str = "exec") -> ast.AST:
    """ast.parse(source, mode=mode), one thread at a time."""
    with _LOCK:
        return ast.parse(source, mode=mode)
