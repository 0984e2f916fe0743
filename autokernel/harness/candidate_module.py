"""A kernel module's globals hold only what the file itself binds (kernel_file.import_file).

Why: Triton's interpreter, at the first launch of each jit function, copies every global of its
own module that the kernel module lacks into the kernel module (FunctionRewriter's exec of the
rewritten function): inspect, numpy, its semantic object (whose .lang reaches typing and Triton's
knobs), its own helpers. The static guard refuses every read of a name kernel.py does not bind
(guard_names.py), so after the import those copies are out of the file's reach. During the
import they are not: a launch at the top level, then a helper that reads `inspect`, then
`inspect = None`, and the helper has read the interpreter's module before the file's own binding
ran. So each name the file binds at its top level, and that the interpreter would copy in, is
bound to None before the file's code runs: the interpreter copies only names that are missing,
and a read before the file's own binding finds None, as Python would have raised NameError.
The names the file does not bind are left to the interpreter, which needs some of them (its
`tl` when the file names triton.language differently); the guard keeps the file off them.

Every import of a kernel file goes through kernel_file.import_file, which seals it: the
sandboxed worker and, for a judged file, verify and use_kernels in the user's own process.
"""

from __future__ import annotations

import symtable
import sys

INTERPRETER = "triton.runtime.interpreter"


def seal(namespace: dict, source: str) -> None:
    """Bind to None, in a fresh module's namespace, every name that `source` binds at module
    level and that the Triton interpreter (if it is in use) would copy into it."""
    interpreter = sys.modules.get(INTERPRETER)
    if interpreter is None:  # compiled Triton copies nothing into kernel modules
        return
    copied = {n for n in vars(interpreter) if not (n.startswith("__") and n.endswith("__"))}
    for name in module_bindings(source) & copied:
        namespace.setdefault(name, None)


def module_bindings(source: str) -> set[str]:
    """Every name the source binds in its module's namespace: at the top level on any path, or
    from a function through a global statement. Empty when it does not parse."""
    try:
        top = symtable.symtable(source, "kernel.py", "exec")
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return set()
    names = {s.get_name() for s in top.get_symbols() if s.is_assigned() or s.is_imported()}
    stack = list(top.get_children())
    while stack:
        table = stack.pop()
        stack.extend(table.get_children())
        names |= {s.get_name() for s in table.get_symbols() if s.is_declared_global()}
    return names
