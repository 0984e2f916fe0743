"""The static guard's rules for names: which names kernel.py may read, and which it may bind.

Why a rule for names at all: the attribute and import rules judge what a chain of names leads
to, and that is only sound while every name means what the file says it means. Three things
break that, and each was a working escape:

- a name the file never defines can still be found at run time: Triton's interpreter copies its
  own module's globals (inspect, numpy, ...) into the kernel module at the first launch, and
  functools.wraps(..., updated=("__globals__",)) merged torch's globals (os, sys) into it. So
  every name read must be bound at the top level of kernel.py on every path (an import, an
  assignment, a def or class; both branches of an if, the body and every handler of a try), or
  be an allowed builtin, and no module-level name may be deleted again;
- a dunder bound under another spelling changes how Python itself resolves names:
  `import torch as __builtins__` makes torch's namespace (os, sys) the builtins of every function
  defined after it. Name nodes were checked; aliases, except targets, parameters, match captures
  and global statements carry their names as plain strings, and now follow the same rule;
- a class pattern reads attributes named by plain strings (`case object(__globals__=g)`), so its
  keywords follow the attribute rule;
- `from __future__ import annotations` keeps annotations as strings, and the symbol table then
  records none of their names (`def f(x: getattr)` read nothing); typing and inspect evaluate
  those strings later, so annotation names follow the read rules as if evaluated.

The builtins rule lives here too: a builtin is a name nobody bound.
"""

from __future__ import annotations

import ast
import symtable

from autokernel.harness.guard_lists import (
    ALLOWED_BUILTINS,
    ESCAPE_ATTRS,
    FORBIDDEN_CALLS,
    HOST_READ_ATTRS,
    REFUSED_BUILTINS,
    SAFE_DUNDER_NAMES,
    STREAM_ATTRS,
    STRING_LOOKUP_ATTRS,
)

Problem = tuple[int, str]  # (line, what): static_check turns them into Findings


def is_dunder(name: str) -> bool:
    return name.startswith("__") and name.endswith("__")


def attribute_problem(attr: str) -> str | None:
    """Why `obj.<attr>` (or a class pattern's `attr=`) is refused on any object; None if not."""
    if attr.startswith("_"):
        return f"private or dunder attribute .{attr} is not allowed"
    if attr in ESCAPE_ATTRS:
        return f"attribute .{attr} is not allowed in kernel.py"
    if attr in STRING_LOOKUP_ATTRS:
        return (f".{attr}() looks up the attributes named in its string (dunders included); "
                "use an f-string")  # fmt: skip
    if attr in HOST_READ_ATTRS:
        return (f".{attr} hands a tensor's values to Python, called or not: compute in the "
                "kernel")  # fmt: skip
    if attr in STREAM_ATTRS:
        return f".{attr}: kernels must launch on the current stream"
    return None


def _targets(node: ast.AST) -> set[str]:
    if isinstance(node, ast.Name):
        return {node.id}
    if isinstance(node, ast.Tuple | ast.List):
        return set().union(*(_targets(e) for e in node.elts))
    if isinstance(node, ast.Starred):
        return _targets(node.value)
    return set()  # an attribute or subscript binds no name


def bound_everywhere(body: list[ast.stmt]) -> set[str]:
    """The names that `body`, run from the top without an exception, has bound on every path
    that goes on past it (a branch ending in raise does not). A loop may run zero times and a
    match may match nothing, so neither binds for certain."""
    out: set[str] = set()
    for stmt in body:
        out |= _bound_by(stmt)
    return out


def _bound_by(stmt: ast.stmt) -> set[str]:
    if isinstance(stmt, ast.Import | ast.ImportFrom):
        return {
            a.asname or (a.name.split(".")[0] if isinstance(stmt, ast.Import) else a.name)
            for a in stmt.names
            if a.name != "*"
        }
    if isinstance(stmt, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
        return {stmt.name}
    if isinstance(stmt, ast.Assign):
        return set().union(*(_targets(t) for t in stmt.targets))
    if isinstance(stmt, ast.AnnAssign):
        return _targets(stmt.target) if stmt.value is not None else set()
    if isinstance(stmt, ast.If):
        branches = [b for b in (stmt.body, stmt.orelse) if _falls_through(b)]
        return set.intersection(*(bound_everywhere(b) for b in branches)) if branches else set()
    if isinstance(stmt, ast.With | ast.AsyncWith):
        items = set().union(*(_targets(i.optional_vars) for i in stmt.items if i.optional_vars))
        return items | bound_everywhere(stmt.body)
    if isinstance(stmt, ast.Try | getattr(ast, "TryStar", ast.Try)):
        done = bound_everywhere(stmt.body) | bound_everywhere(stmt.orelse)
        for handler in stmt.handlers:
            if _falls_through(handler.body):
                done &= bound_everywhere(handler.body)
        return done | bound_everywhere(stmt.finalbody)
    return set()


def _falls_through(body: list[ast.stmt]) -> bool:
    """False for a block that ends in raise: the statements after it never run from it."""
    return not (body and isinstance(body[-1], ast.Raise))


def annotation_problems(tree: ast.Module, nodes: list[ast.AST]) -> list[Problem]:
    """Names read in postponed annotations (see the module docstring): a refused builtin, or a
    name the file does not bind at the top level on every path. Without the future import the
    symbol table sees annotations, and builtin_problems and undefined_problems judge them."""
    postponed = any(
        isinstance(n, ast.ImportFrom) and n.module == "__future__"
        and any(a.name == "annotations" for a in n.names)
        for n in tree.body
    )  # fmt: skip
    if not postponed:
        return []
    annotations: list[ast.AST] = []
    for node in nodes:
        if isinstance(node, ast.arg | ast.AnnAssign) and node.annotation is not None:
            annotations.append(node.annotation)
        elif isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef) and node.returns:
            annotations.append(node.returns)
    everywhere = bound_everywhere(tree.body)
    out: list[Problem] = []
    for annotation in annotations:
        for n in ast.walk(annotation):
            if not isinstance(n, ast.Name) or is_dunder(n.id):
                continue  # a dunder name is refused as such
            if n.id in REFUSED_BUILTINS and n.id not in everywhere:
                out.append((n.lineno, f"{n.id} is not allowed in kernel.py (not an allowed "
                            "builtin), annotations included"))  # fmt: skip
            elif n.id not in everywhere | ALLOWED_BUILTINS:
                out.append(
                    (
                        n.lineno,
                        f"{n.id} is not defined in kernel.py on every path: "
                        "bind it at the top level before naming it in an annotation",
                    )
                )
    return out


def class_bindings(nodes: list[ast.AST]) -> tuple[set[str], set[str]]:
    """(names bound by class statements, names bound any other way) in the whole file."""
    classes: set[str] = set()
    other: set[str] = set()
    for node in nodes:
        if isinstance(node, ast.ClassDef):
            classes.add(node.name)
        elif isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            other.add(node.name)
        elif isinstance(node, ast.Name) and not isinstance(node.ctx, ast.Load):
            other.add(node.id)
        elif isinstance(node, ast.alias):
            other.add(node.asname or node.name.split(".")[0])
        elif isinstance(node, ast.arg):
            other.add(node.arg)
        elif isinstance(node, ast.ExceptHandler | ast.MatchAs | ast.MatchStar) and node.name:
            other.add(node.name)
        elif isinstance(node, ast.MatchMapping) and node.rest:
            other.add(node.rest)
    return classes, other


def _tables(top: symtable.SymbolTable) -> list[symtable.SymbolTable]:
    out, stack = [], [top]
    while stack:
        t = stack.pop()
        out.append(t)
        stack.extend(t.get_children())
    return out


def _first_lines(nodes: list[ast.AST]) -> dict[str, int]:
    lines: dict[str, int] = {}
    for n in nodes:
        if isinstance(n, ast.Name) and n.id not in lines:
            lines[n.id] = n.lineno
    return lines


def builtin_problems(nodes: list[ast.AST], top: symtable.SymbolTable) -> list[Problem]:
    """Every use of a builtin outside ALLOWED_BUILTINS. A name counts as the builtin unless it
    is a function's local or closure variable: a module or class binding can be skipped at run
    time (`if 0: open = None`), a function's local cannot."""
    lines = {k: v for k, v in _first_lines(nodes).items() if k in REFUSED_BUILTINS}
    seen: set[str] = set()
    out: list[Problem] = []
    for t in _tables(top):
        is_function = t.get_type() == "function"  # a str, or a StrEnum from 3.13
        for sym in t.get_symbols():
            name = sym.get_name()
            if name not in lines or name in seen or name.startswith("__"):
                continue
            if is_function and (sym.is_local() or sym.is_free() or sym.is_parameter()):
                continue
            if not (sym.is_referenced() or sym.is_assigned()):
                continue
            seen.add(name)
            call = "()" if name in FORBIDDEN_CALLS else ""
            out.append((lines[name], f"{name}{call} is not allowed in kernel.py (not an allowed "
                        "builtin)"))  # fmt: skip
    return out


def undefined_problems(
    tree: ast.Module, nodes: list[ast.AST], top: symtable.SymbolTable
) -> list[Problem]:
    """Every global name read that kernel.py may not have bound, and every deletion of a
    module-level name. A function, lambda or class body may run any time after the import, so
    what it reads must be bound on every path at the top level; the module's own statements run
    once, in order, so there a name bound anywhere at the top level (a loop variable, an except
    target) is enough: read before its binding, it fails the import."""
    everywhere = bound_everywhere(tree.body)
    builtins_ok = ALLOWED_BUILTINS | SAFE_DUNDER_NAMES | REFUSED_BUILTINS  # refused: above
    lines = _first_lines(nodes)
    missing: set[str] = set()
    declared_global: set[str] = set()
    for t in _tables(top):
        module_level = t.get_type() == "module"
        for sym in t.get_symbols():
            name = sym.get_name()
            if sym.is_declared_global():
                declared_global.add(name)
            if not sym.is_referenced() or is_dunder(name) or name in builtins_ok:
                continue  # a dunder name is refused as such
            if module_level and not (sym.is_assigned() or sym.is_imported()):
                missing.add(name)
            elif not module_level and sym.is_global() and name not in everywhere:
                missing.add(name)
    how = "bind it at the top level (import, assignment, def) before using it"
    out = [(lines.get(n, 0), f"{n} is not defined in kernel.py on every path: {how}")
           for n in sorted(missing)]  # fmt: skip
    top_level = {id(n) for n in _module_level(tree)}
    for node in nodes:
        if not isinstance(node, ast.Delete):
            continue
        for target in node.targets:
            at_top = id(node) in top_level
            if isinstance(target, ast.Name) and (at_top or target.id in declared_global):
                out.append((node.lineno, f"del {target.id}: a module-level name stays bound "
                            "(unbound, the run time could fill it)"))  # fmt: skip
    return out


def _module_level(tree: ast.Module) -> list[ast.AST]:
    """The statements that run in the module's own scope (not in a def, lambda or class)."""
    out: list[ast.AST] = []
    stack: list[ast.AST] = list(tree.body)
    while stack:
        node = stack.pop()
        out.append(node)
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef | ast.Lambda):
            continue
        stack.extend(ast.iter_child_nodes(node))
    return out


def identifier_problems(nodes: list[ast.AST]) -> list[Problem]:
    """Names that the tree keeps as plain strings: bindings that may not be dunders, and class
    pattern keywords, which are attribute lookups."""
    out: list[Problem] = []

    def binding(node: ast.AST, name: str | None, what: str) -> None:
        if name and is_dunder(name):
            out.append((getattr(node, "lineno", 0), f"{what} {name}: binding a dunder name "
                        "is not allowed in kernel.py"))  # fmt: skip

    for node in nodes:
        if isinstance(node, ast.alias) and node.asname:
            binding(node, node.asname, "import ... as")
        elif isinstance(node, ast.ExceptHandler):
            binding(node, node.name, "except ... as")
        elif isinstance(node, ast.arg):
            binding(node, node.arg, "parameter")
        elif isinstance(node, ast.keyword):
            binding(node, node.arg, "keyword argument")
        elif isinstance(node, ast.MatchAs | ast.MatchStar):
            binding(node, node.name, "match capture")
        elif isinstance(node, ast.MatchMapping):
            binding(node, node.rest, "match capture")
        elif isinstance(node, ast.Global | ast.Nonlocal):
            for name in node.names:
                binding(node, name, "global")
        elif isinstance(node, ast.MatchClass):
            for attr in node.kwd_attrs:
                problem = attribute_problem(attr)
                if problem:
                    out.append((node.lineno, f"class pattern: {problem}"))
    return out
