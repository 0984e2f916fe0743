"""Every parse of Python source in the package goes through autokernel.syntax's lock."""

from __future__ import annotations

import ast
import threading
from pathlib import Path

from autokernel import syntax

PACKAGE = Path(__file__).resolve().parents[1] / "autokernel"


def test_no_module_calls_ast_parse_directly():
    # CPython 3.11 can fail a correct parse when threads parse at once (syntax.py): one call
    # that bypasses the lock is enough for a parallel night's LLM threads to hit it.
    offenders = []
    for path in PACKAGE.rglob("*.py"):
        if path.name == "syntax.py":
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            func = getattr(node, "func", None)
            if (isinstance(func, ast.Attribute) and func.attr == "parse"
                    and isinstance(func.value, ast.Name) and func.value.id == "ast"):  # fmt: skip
                offenders.append(f"{path.relative_to(PACKAGE)}:{node.lineno}")
    assert not offenders, offenders


def test_parses_from_many_threads_agree():
    source = "\n".join(f"def f{i}(x):\n    return [y * {i} for y in x if y]" for i in range(200))
    want = ast.dump(syntax.parse(source))
    got: list[str] = []

    def work() -> None:
        for _ in range(20):
            got.append(ast.dump(syntax.parse(source)))

    threads = [threading.Thread(target=work) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(got) == 80 and set(got) == {want}
