"""The static guard: what kernel.py may contain, judged from its syntax tree without importing it.

Allow-lists wherever Python lets us: named modules and, within each, named members; named
builtins; no attribute starting with `_`; no assignment to any attribute (one line rebinding a
torch method the comparison uses would forge a PASS); inside `@triton.jit` bodies, which the
interpreter runs as plain Python, only Triton calls, other jit functions and a few builtins;
every name read bound in the file itself, and no dunder bound under any spelling (guard_names.py).
The walk is iterative, so no source makes the guard itself fail: a SyntaxError stays one (an
import crash, as Python would report it), any other parser failure is UnjudgeableSource.
"""

from __future__ import annotations

import ast
import builtins
import symtable
from dataclasses import dataclass

from autokernel import syntax
from autokernel.harness.guard_asm import inline_asm_problem
from autokernel.harness.guard_lists import (
    ALLOWED_BUILTINS,
    ALLOWED_IMPORTS,
    ALLOWED_TORCH,
    AUTOKERNEL_MEMBERS,
    ESCAPE_ATTRS,
    FORBIDDEN_METHODS,
    INLINE_ASM,
    JIT_BUILTINS,
    MODULE_MEMBERS,
    REFUSED_MEMBERS,
    SAFE_DUNDER_METHODS,
    SAFE_DUNDER_NAMES,
    TENSOR_DESCRIPTOR,
    TL_LIBRARIES,
    TORCH_NO_MEMBERS,
    TRITON_JIT_DECORATORS,
    TRITON_MEMBERS,
)
from autokernel.harness.guard_names import (
    annotation_problems,
    attribute_problem,
    builtin_problems,
    class_bindings,
    identifier_problems,
    undefined_problems,
)
from autokernel.harness.guard_triton import tl_problem


@dataclass(frozen=True)
class Finding:
    line: int
    what: str

    def __str__(self) -> str:
        return f"line {self.line}: {self.what}"


class UnjudgeableSource(ValueError):
    """Source that parses as Python only in principle: nested too deeply for the parser, too
    large, or with null bytes. It is refused (REJECTED in static), never an internal error."""


def _dotted(node: ast.AST) -> list[str] | None:
    """['torch', 'cuda', 'Stream'] for torch.cuda.Stream; None when the root is not a name."""
    parts: list[str] = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if isinstance(node, ast.Name):
        parts.append(node.id)
        return parts[::-1]
    return None


def path_problem(path: list[str], importing: bool = False) -> str | None:
    """Why the module path (e.g. ['triton', 'language', 'load']) may not be used; None if it
    may. A module's own path (['triton', 'language']) is fine here: bare use is judged apart.
    An import may also name a torch module on the way to an allowed name (torch.utils)."""
    root, rest = path[0], path[1:]
    dotted = ".".join(path)
    bad = next((p for p in rest if p.startswith("_") or p in ESCAPE_ATTRS), None)
    if bad is not None:
        return f"{dotted}: .{bad} is not allowed in kernel.py"
    if root == "torch":
        sub = ".".join(rest)
        ok = (
            not sub
            or sub in ALLOWED_TORCH
            or any(sub.startswith(a + ".") for a in ALLOWED_TORCH - TORCH_NO_MEMBERS)
            or (importing and any(a.startswith(sub + ".") for a in ALLOWED_TORCH))
        )
        if not ok:
            return (f"torch.{sub} is not allowed in kernel.py: torch may only allocate tensors "
                    "and query metadata; compute in the Triton/CUDA kernel")  # fmt: skip
        return None
    if root == "triton":
        if not rest or rest[0] in TRITON_MEMBERS:
            return None
        if rest[0] == "language":
            return tl_problem(rest[1:], dotted)
        if tuple(rest[:3]) == TENSOR_DESCRIPTOR[: len(rest[:3])]:
            return None
        allowed = [*sorted(TRITON_MEMBERS), "language", ".".join(TENSOR_DESCRIPTOR)]
        return f"{dotted} is not allowed in kernel.py (triton: {', '.join(allowed)})"
    if root == "autokernel":
        module, names = (rest[0], rest[1:]) if rest else ("", [])
        if module in AUTOKERNEL_MEMBERS and len(names) <= 1:
            if not names or names[0] in AUTOKERNEL_MEMBERS[module]:
                return None
        offered = [
            f"autokernel.{m}.{n}" for m, ns in AUTOKERNEL_MEMBERS.items() for n in sorted(ns)
        ]
        return f"{dotted} is not allowed in kernel.py (from autokernel only: {', '.join(offered)})"
    if not rest:
        return None
    members = MODULE_MEMBERS.get(root)
    if rest[0] in REFUSED_MEMBERS.get(root, ()) or (members is not None and rest[0] not in members):
        return f"{root}.{rest[0]} is not allowed in kernel.py"
    return None


def _is_module_path(path: str) -> bool:
    parts = path.split(".")
    if len(parts) == 1:
        return True
    if parts[0] == "triton":
        rest = tuple(parts[1:])
        return rest in {("language",), ("tools",), TENSOR_DESCRIPTOR[:2]} or (
            rest[0] == "language" and any(rest[1:] == lib[: len(rest) - 1] for lib in TL_LIBRARIES)
        )
    return False


def parse(source: str) -> ast.Module:
    """ast.parse, with every failure but a SyntaxError turned into UnjudgeableSource."""
    if "\0" in source:
        raise UnjudgeableSource("kernel.py contains a null byte; save it as plain UTF-8 text")
    try:
        return syntax.parse(source)
    except (RecursionError, MemoryError, ValueError) as exc:
        raise UnjudgeableSource(
            f"kernel.py cannot be parsed ({type(exc).__name__}): an expression is nested too "
            "deeply; split it into several statements"
        ) from None


class _Checker:
    """One pass over a parsed file; `findings` holds what it refused."""

    def __init__(self, tree: ast.Module) -> None:
        self.tree = tree
        self.findings: list[Finding] = []
        self.nodes: list[ast.AST] = []
        self.aliases: dict[str, str] = {}  # local name -> module path it stands for
        self.jit_names: set[str] = set()
        self.host_defs: set[str] = set()  # module-level functions and classes not jit-compiled
        self.jit_nodes: set[int] = set()  # id() of every node inside a jit function's body
        self.chain_inner: set[int] = set()  # Attribute nodes judged as part of a longer chain
        self.chain_roots: set[int] = set()  # Names that start an attribute chain
        self.class_names: set[str] | None = None  # class_bindings, computed on first need
        self.other_bindings: set[str] = set()

    def flag(self, node: ast.AST, what: str) -> None:
        self.findings.append(Finding(getattr(node, "lineno", 0), what))

    def run(self) -> list[Finding]:
        self.nodes = nodes = list(ast.walk(self.tree))
        for node in nodes:
            if isinstance(node, ast.Import | ast.ImportFrom):
                self._import(node)
            elif isinstance(node, ast.Attribute):
                self.chain_roots.add(id(node.value))
        self._find_jit_functions()
        for node in nodes:
            handler = getattr(self, f"_{type(node).__name__}", None)
            if handler is not None:
                handler(node)
        return self.findings

    # ---- imports ----

    def _bind(self, node: ast.AST, local: str, path: str) -> None:
        if self.aliases.get(local, path) != path:
            self.flag(node, f"{local} is bound to two different imports")
        self.aliases[local] = path
        problem = path_problem(path.split("."), importing=True)
        if problem:
            self.flag(node, problem)

    def _import(self, node: ast.Import | ast.ImportFrom) -> None:
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.split(".")[0] not in ALLOWED_IMPORTS:
                    allowed = ", ".join(sorted(ALLOWED_IMPORTS - {"__future__"}))
                    self.flag(node, f"import of {alias.name!r} is not allowed (allowed: {allowed})")
                    continue
                if alias.asname:
                    self._bind(node, alias.asname, alias.name)
                else:
                    root = alias.name.split(".")[0]
                    self._bind(node, root, root)
                    problem = path_problem(alias.name.split("."), importing=True)
                    if problem:
                        self.flag(node, problem)
            return
        module = node.module or ""
        if node.level or module.split(".")[0] not in ALLOWED_IMPORTS:
            self.flag(node, f"import from {module or '.'!r} is not allowed")
            return
        for alias in node.names:
            if alias.name == "*":
                self.flag(node, f"from {module} import * is not allowed: name what you use")
                continue
            self._bind(node, alias.asname or alias.name, f"{module}.{alias.name}")

    # ---- jit functions ----

    def _resolve(self, node: ast.AST) -> list[str] | None:
        """The module path of an attribute chain rooted at an import, else None."""
        chain = _dotted(node)
        if chain is None or chain[0] not in self.aliases:
            return None
        return [*self.aliases[chain[0]].split("."), *chain[1:]]

    def _is_jit(self, fn: ast.FunctionDef | ast.AsyncFunctionDef) -> bool:
        for dec in fn.decorator_list:
            path = self._resolve(dec.func if isinstance(dec, ast.Call) else dec)
            if path and path[0] == "triton" and path[1:] and path[-1] in TRITON_JIT_DECORATORS:
                return True
        return False

    def _find_jit_functions(self) -> None:
        for node in self.nodes:  # nested ones too: a jit body is a jit body anywhere
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef) and self._is_jit(node):
                self.jit_names.add(node.name)
                for part in node.body:
                    self.jit_nodes.update(id(n) for n in ast.walk(part))
        for stmt in self.tree.body:
            if isinstance(stmt, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
                if stmt.name not in self.jit_names:
                    self.host_defs.add(stmt.name)

    # ---- node handlers (named after the node type) ----

    def _Name(self, node: ast.Name) -> None:
        name = node.id
        if name.startswith("__") and name.endswith("__") and name not in SAFE_DUNDER_NAMES:
            self.flag(node, f"{name} is not allowed in kernel.py")
        elif name in self.aliases and not isinstance(node.ctx, ast.Load):
            self.flag(node, f"{name} names an import; do not rebind it")
        elif name in self.aliases and id(node) not in self.chain_roots:
            path = self.aliases[name]
            if _is_module_path(path) or path_problem(path.split(".")):
                self.flag(node, f"{name} may only be used as {path}.<allowed name>(...)")
        elif id(node) in self.jit_nodes and name in self.host_defs:
            self.flag(node, f"{name} is not a @triton.jit function; a jit body may use only "
                      "Triton, other jit functions and a few builtins")  # fmt: skip

    def _Attribute(self, node: ast.Attribute) -> None:
        attr = node.attr
        problem = attribute_problem(attr)
        if problem:
            self.flag(node, problem)
        if not isinstance(node.ctx, ast.Load):
            self.flag(node, f"assigning or deleting .{attr} is not allowed in kernel.py: "
                      "keep state in local variables or a module-level dict")  # fmt: skip
        if isinstance(node.value, ast.Attribute):
            self.chain_inner.add(id(node.value))
        if id(node) in self.chain_inner:
            return  # the whole chain is judged at its outermost attribute
        path = self._resolve(node)
        if path is None:
            return
        problem = path_problem(path)
        if problem:
            self.flag(node, problem)
        elif _is_module_path(".".join(path)):
            # `m = tl.math` hands on a module under a name _resolve does not know, and every
            # chain from it goes unjudged (m.core.typing.get_type_hints evals strings).
            self.flag(node, f"{'.'.join(path)} is a module: use it only to name a member, "
                      f"{'.'.join(path)}.<allowed name>")  # fmt: skip
        elif id(node) in self.jit_nodes and path[0] == "torch":
            self.flag(node, f"{'.'.join(path)} inside a @triton.jit body: use triton.language")

    def _Subscript(self, node: ast.Subscript) -> None:
        if isinstance(node.ctx, ast.Load):
            return
        root = node.value
        while isinstance(root, ast.Attribute | ast.Subscript):
            root = root.value
        if isinstance(root, ast.Name) and root.id in self.aliases:
            self.flag(node, f"assigning into {root.id}.<...> is not allowed in kernel.py")

    def _Call(self, node: ast.Call) -> None:
        func = node.func
        if id(node) in self.jit_nodes:
            self._jit_call(node)
            return
        if isinstance(func, ast.Attribute) and func.attr in FORBIDDEN_METHODS:
            chain = _dotted(func)
            if not (chain and chain[0] in self.aliases):
                self.flag(node, f".{func.attr}() computes with torch outside the kernel; do "
                          "that arithmetic inside the @triton.jit kernel")  # fmt: skip

    def _jit_call(self, node: ast.Call) -> None:
        func = node.func
        if tuple(self._resolve(func) or ()) == INLINE_ASM:
            problem = inline_asm_problem(node)
            if problem:
                self.flag(node, problem)
        if isinstance(func, ast.Name):
            ok = func.id in self.jit_names or func.id in JIT_BUILTINS
            what = f"{func.id}()"
        elif isinstance(func, ast.Attribute):
            path = self._resolve(func)
            ok = path is None or path[0] == "triton"  # a method of a value, or Triton's own
            what = f"{'.'.join(path or [])}()"
        else:
            ok, what = False, "a computed callable"
        if not ok:
            self.flag(node, f"{what} inside a @triton.jit body: the interpreter would run it as "
                      "Python; call only triton.language, other jit functions, "
                      f"{', '.join(sorted(JIT_BUILTINS))}")  # fmt: skip

    def _FunctionDef(self, node: ast.FunctionDef | ast.AsyncFunctionDef) -> None:
        if node.name in self.aliases:
            self.flag(node, f"def {node.name} rebinds an import")
        dunder = node.name.startswith("__") and node.name.endswith("__")
        if dunder and node.name not in SAFE_DUNDER_METHODS:
            self.flag(node, f"defining {node.name} is not allowed: it changes how the harness "
                      "sees your objects")  # fmt: skip

    _AsyncFunctionDef = _FunctionDef

    def _ClassDef(self, node: ast.ClassDef) -> None:
        if node.name in self.aliases:
            self.flag(node, f"class {node.name} rebinds an import")
        if node.keywords:
            self.flag(node, f"class {node.name}: metaclass and class keywords are not allowed")
        for base in node.bases:
            path = self._resolve(base)
            if path and path[0] in ("torch", "triton"):
                self.flag(node, f"class {node.name} may not subclass {'.'.join(path)}")
            elif not isinstance(base, ast.Name | ast.Attribute):
                self.flag(node, f"class {node.name}: bases must be plain names")
            elif path is None and not self._own_class(base):
                # `T = torch.Tensor; class S(T)` subclassed the tensor through a plain name,
                # and a subclass answers data_ptr() or untyped_storage() with what it likes.
                self.flag(node, f"class {node.name}: a base must be a class this file defines "
                          "with `class`, an allowed builtin, or an imported name")  # fmt: skip

    def _own_class(self, base: ast.expr) -> bool:
        """Whether base names a class statement of this file, or an allowed builtin class, and
        nothing else ever binds that name."""
        if not isinstance(base, ast.Name):
            return False
        if self.class_names is None:
            self.class_names, self.other_bindings = class_bindings(self.nodes)
        name = base.id
        if name in self.other_bindings:
            return False
        builtin = name in ALLOWED_BUILTINS and isinstance(getattr(builtins, name, None), type)
        return name in self.class_names or (builtin and name not in self.class_names)


def check_source(source: str) -> list[Finding]:
    """Findings of the static guard (empty when clean). Raises SyntaxError on bad Python and
    UnjudgeableSource on source the parser cannot take (nesting, size, null bytes)."""
    tree = parse(source)
    checker = _Checker(tree)
    try:
        checker.run()
        table = symtable.symtable(source, "kernel.py", "exec")
        for line, what in (
            *builtin_problems(checker.nodes, table),
            *undefined_problems(tree, checker.nodes, table),
            *identifier_problems(checker.nodes),
            *annotation_problems(tree, checker.nodes),
        ):
            checker.flag(ast.Name(lineno=line), what)
    except (RecursionError, MemoryError) as exc:
        raise UnjudgeableSource(
            f"kernel.py cannot be judged ({type(exc).__name__}): an expression is nested too "
            "deeply; split it into several statements"
        ) from None
    return sorted(checker.findings, key=lambda f: f.line)
