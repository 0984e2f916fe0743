"""The static guard's rule for names under triton.language: Triton's own objects only.

triton.language and its math libraries are open by member, because the members are what a
kernel is written with. But a module's namespace also holds what the module itself imported:
`triton.language.math.wraps` is functools.wraps (refused by name as functools.wraps; with
updated=("__globals__",) it merged torch's globals, importlib among them, into kernel.py), and
`.core` is a module with its own imports behind it. So a member is refused when it is a module
(TL_MODULES, and any other the installed Triton has) or an object defined outside Triton.

Looking a member up imports Triton's language package in the judging process: trusted code,
never the candidate's. Where Triton cannot be imported, the name lists alone decide.
"""

from __future__ import annotations

import functools
import importlib
import types

from autokernel.harness.guard_lists import TL_LIBRARIES, TL_MODULES

TL = "triton.language"


def tl_problem(rest: list[str], dotted: str) -> str | None:
    """Why triton.language.<rest> may not be used; None if it may (rest may be empty)."""
    library: tuple[str, ...] = ()
    for lib in TL_LIBRARIES:
        if tuple(rest[: len(lib)]) == lib:
            library, rest = lib, rest[len(lib) :]
            break
    if rest and rest[0] in TL_MODULES:
        return f"{dotted}: triton.language.{rest[0]} is not allowed in kernel.py"
    if rest:
        where = ".".join((TL, *library))
        foreign = _foreign(where, rest[0])
        if foreign:
            return (f"{dotted}: {where}.{rest[0]} is {foreign}, not Triton's own; "
                    "kernel.py may use only Triton's objects there")  # fmt: skip
    return None


@functools.cache
def _foreign(module: str, name: str) -> str:
    """What module.name is when it is not Triton's own object ("" when it is, or unknown)."""
    try:
        value = getattr(importlib.import_module(module), name)
    except Exception:  # no such member (the launch fails in the worker), or no Triton here
        return ""
    if isinstance(value, types.ModuleType):
        return f"the module {value.__name__}"
    owner = getattr(value, "__module__", None)
    if isinstance(owner, str) and owner.split(".")[0] != "triton":
        return f"{owner}'s {name}, imported there"
    return ""
