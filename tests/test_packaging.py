"""What the package holds and how it imports its parts: kernels/, reference.py, orchestrate.py
and program.md are reached through `autokernel` only, so a user's own `reference.py` or Hugging
Face's `kernels` package (both importable names in a user's environment) cannot stand in for
ours, and a built wheel has nothing top-level but `autokernel`."""

from __future__ import annotations

import ast
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

import autokernel
from autokernel import shipped

ROOT = Path(__file__).resolve().parents[1]
SHADOWED = ("kernels", "reference", "orchestrate")  # top-level in the repo, ours in the package
SOURCES = ("autokernel", "tests", "benchmarks", "examples", "orchestrate.py", "reference.py")


def _python_files() -> list[Path]:
    files: list[Path] = []
    for name in SOURCES:
        path = ROOT / name
        files += sorted(path.rglob("*.py")) if path.is_dir() else [path]
    return [f for f in files if "faults" not in f.parts]  # planted kernels, parsed elsewhere


def _top_level_imports(tree: ast.AST) -> list[tuple[int, str]]:
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found += [(node.lineno, a.name) for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            found.append((node.lineno, node.module))
    return [(n, name) for n, name in found if name.split(".")[0] in SHADOWED]


def test_no_code_imports_the_repository_top_level_names():
    bad = []
    for path in _python_files():
        tree = ast.parse(path.read_text(), str(path))
        where = path.relative_to(ROOT)
        bad += [f"{where}:{n}: import {name}" for n, name in _top_level_imports(tree)]
    assert not bad, "import through the package (from autokernel import ...):\n" + "\n".join(bad)


def test_the_package_ships_the_starters_reference_scheduler_and_playbook():
    assert shipped.PROGRAM.is_file() and shipped.PROGRAM.name == "program.md"
    starters = sorted(p.stem for p in shipped.STARTERS.glob("[a-z]*.py"))
    from autokernel.specs import SPECS

    assert starters == sorted(SPECS)
    assert shipped.starter_path("softmax").read_text() == (ROOT / "kernels/softmax.py").read_text()
    for name in ("reference.py", "orchestrate.py"):
        inside = Path(autokernel.__file__).parent / name
        assert inside.read_text() == (ROOT / name).read_text()


def _hostile_dir(where: Path) -> Path:
    """A user's project folder: its own reference.py and orchestrate.py, and a `kernels` package
    (as Hugging Face's is named); importing any of them fails loudly."""
    where.mkdir(parents=True, exist_ok=True)
    for name in ("reference", "orchestrate"):
        (where / f"{name}.py").write_text(f"raise ImportError('the user\\'s own {name}.py')\n")
    (where / "kernels").mkdir(exist_ok=True)
    (where / "kernels" / "__init__.py").write_text("raise ImportError('another kernels package')\n")
    (where / "kernels" / "softmax.py").write_text("raise ImportError('another kernels package')\n")
    return where


@pytest.mark.slow
def test_every_module_imports_with_a_users_reference_and_kernels_first_on_the_path(tmp_path):
    user = _hostile_dir(tmp_path / "project")
    code = textwrap.dedent(
        """
        import importlib, pkgutil, sys
        import autokernel
        import torch
        # CUDA starters build their kernels for the GPU when imported: a GPU machine's check
        names = [m.name for m in pkgutil.walk_packages(autokernel.__path__, "autokernel.")
                 if not m.name.endswith("__main__")
                 and (torch.cuda.is_available() or ".kernels.cuda." not in m.name)]
        for name in names:
            importlib.import_module(name)
        from autokernel import reference, orchestrate
        from autokernel.specs import SPECS
        assert all(callable(getattr(reference, t)) for t in SPECS)
        assert "reference" not in sys.modules and "kernels" not in sys.modules, "shadowed"
        print(len(names))
        """
    )
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(user), str(ROOT)])}
    out = subprocess.run(
        [sys.executable, "-c", code], cwd=user, env=env, capture_output=True, text=True,
        timeout=300,
    )  # fmt: skip
    assert out.returncode == 0, out.stderr[-3000:]
    assert int(out.stdout.split()[-1]) > 50  # every module, the starters included
