"""The package's shape: imports point one way (no module reaches, even for type hints or inside
a function, a module that reaches back), and no module grows past MAX_LINES. Read from the
source with ast, so a cycle shows here before it shows as an ImportError at some import order."""

from __future__ import annotations

import ast
from pathlib import Path

import autokernel

PACKAGE = Path(autokernel.__file__).resolve().parent
MAX_LINES = 400
# Known and owned elsewhere; each entry must still hold (so the list only shrinks).
KNOWN_CYCLES: set[frozenset[str]] = set()
KNOWN_LONG: set[str] = set()


def _modules() -> dict[str, Path]:
    """Every module of the package by dotted name (the links to the repository's
    orchestrate.py and reference.py included: they are autokernel.orchestrate, .reference)."""
    found = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        rel = path.relative_to(PACKAGE).with_suffix("")
        parts = ["autokernel", *rel.parts]
        if parts[-1] == "__init__":
            parts.pop()
        found[".".join(parts)] = path
    kernels = PACKAGE / "kernels"  # a link: rglob does not follow it
    for path in sorted(kernels.glob("*.py")):
        found[f"autokernel.kernels.{path.stem}"] = path
    return found


def import_graph() -> dict[str, set[str]]:
    """Module -> the package's modules it imports anywhere in its source."""
    modules = _modules()
    graph: dict[str, set[str]] = {}
    for name, path in modules.items():
        package = name if path.name == "__init__.py" else name.rpartition(".")[0]
        deps: set[str] = set()
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            targets: list[str] = []
            if isinstance(node, ast.Import):
                targets = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    up = package.split(".")[: len(package.split(".")) - node.level + 1]
                    base = ".".join([*up, base] if base else up)
                targets = [base, *(f"{base}.{a.name}" for a in node.names)]
            for target in targets:
                while target and target not in modules:  # a name inside a module: the module
                    target = target.rpartition(".")[0]
                if target and target != name:
                    deps.add(target)
        graph[name] = deps
    return graph


def cycles(graph: dict[str, set[str]]) -> list[frozenset[str]]:
    """The strongly connected components with more than one module (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[frozenset[str]] = []
    for root in graph:
        if root in index:
            continue
        work = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = len(index)
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph[child]))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = set()
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.add(member)
                    if member == node:
                        break
                if len(component) > 1:
                    found.append(frozenset(component))
    return found


def test_the_finder_sees_a_cycle():
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}
    assert cycles(graph) == [frozenset({"a", "b", "c"})]
    assert cycles({"a": {"b"}, "b": set()}) == []


def test_the_graph_holds_the_package_edges():
    graph = import_graph()
    assert "autokernel.timing" in graph["autokernel.harness.benchmark"]
    assert "autokernel.reference" in graph["autokernel.specs.rowwise"]
    assert "autokernel.launch" in graph["autokernel.kernels.softmax"]


def test_no_import_cycles():
    found = set(cycles(import_graph()))
    new = found - KNOWN_CYCLES
    assert not new, "import cycles: " + "; ".join(" <-> ".join(sorted(c)) for c in new)
    assert KNOWN_CYCLES <= found, f"fixed, take it off KNOWN_CYCLES: {KNOWN_CYCLES - found}"


def test_the_run_package_never_imports_the_policy_or_its_drivers():
    graph = import_graph()
    above = {"autokernel.orchestrate", "autokernel.loop", "autokernel.parallel",
             "autokernel.parallel_jobs", "autokernel.session"}  # fmt: skip
    for name, deps in graph.items():
        if name.startswith("autokernel.run"):
            assert not deps & above, (name, deps & above)
    assert "autokernel.run.state" in graph["autokernel.orchestrate"]


def test_timing_sits_below_harness_and_gpu():
    graph = import_graph()
    assert "autokernel.timing" in graph["autokernel.gpu"]
    assert not {d for d in graph["autokernel.timing"] if d.startswith("autokernel.")}


def test_no_module_over_the_line_limit():
    lengths = {p.relative_to(PACKAGE).as_posix(): len(p.read_text().splitlines())
               for p in _modules().values()}  # fmt: skip
    long = {name for name, n in lengths.items() if n > MAX_LINES}
    assert long <= KNOWN_LONG, {n: lengths[n] for n in long - KNOWN_LONG}
    assert KNOWN_LONG <= long, f"now short enough, take it off KNOWN_LONG: {KNOWN_LONG - long}"


def test_no_test_or_benchmark_module_over_the_line_limit():
    """The same limit for the modules outside the package a newcomer reads: tests and
    benchmark scripts."""
    root = Path(__file__).resolve().parents[1]
    paths = [*root.joinpath("tests").rglob("*.py"), *root.joinpath("benchmarks").glob("*.py")]
    long = {p.relative_to(root).as_posix(): n for p in paths
            if (n := len(p.read_text().splitlines())) > MAX_LINES}  # fmt: skip
    assert not long, long


# Where a kernel type may be named: its spec (specs/), its reference and its starter. The guard's
# allow-lists name torch's and functools' own functions, which happen to share some names.
TYPE_NAMES_MAY_APPEAR = ("autokernel.specs", "autokernel.kernels", "autokernel.reference",
                         "autokernel.harness.guard_lists")  # fmt: skip


def type_names_spelled(path: Path, names: set[str]) -> list[int]:
    """Lines where a string literal (not a docstring or comment) is a kernel type's name."""
    tree = ast.parse(path.read_text(), str(path))
    docstrings = {
        id(node.body[0].value) for node in ast.walk(tree)
        if isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef)
        and node.body and isinstance(node.body[0], ast.Expr)
    }  # fmt: skip
    return [
        node.lineno for node in ast.walk(tree)
        if isinstance(node, ast.Constant) and node.value in names and id(node) not in docstrings
    ]  # fmt: skip


def test_a_new_kernel_type_needs_no_code_outside_its_spec():
    """Everything per type (model side included) derives from the spec registry, so a new type
    is its spec, reference, starter and test: no other module spells a type's name."""
    from autokernel.specs import SPECS

    names = set(SPECS)
    found = {
        name: lines for name, path in _modules().items()
        if not name.startswith(TYPE_NAMES_MAY_APPEAR)
        and (lines := type_names_spelled(path, names))
    }  # fmt: skip
    assert not found, f"kernel type names spelled outside the specs: {found}"


def test_the_spelling_finder_sees_a_literal(tmp_path):
    path = tmp_path / "m.py"
    source = '"""rmsnorm, in a docstring."""\nx = 1  # rmsnorm\nif x == "rmsnorm":\n    x = 2\n'
    path.write_text(source)
    assert type_names_spelled(path, {"rmsnorm"}) == [3]
