"""The package as a user installs it: a wheel built from this checkout, installed into a fresh
virtualenv, every README command that works without a GPU run from a folder that is not the
checkout, the LLM agents included (a scripted OpenAI-compatible server and a command agent).

That folder is a user's project: it holds its own reference.py, orchestrate.py and a `kernels`
package (the name of Hugging Face's), first on PYTHONPATH, and each fails loudly when imported,
so any code path, the sandboxed worker's included, that reaches for a top-level name instead of
the package's own shows here. Slow (a wheel build and a dozen CLI runs under the interpreter):
CI runs it with the rest of the suite."""

from __future__ import annotations

import os
import shutil
import site
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest
from scripted_llm_server import ScriptedLLMServer, reply

from autokernel import DISTRIBUTION, __version__
from autokernel.run.results import ResultsLog

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[1]
STARTER = (ROOT / "kernels" / "softmax.py").read_text()
EDIT = STARTER.replace('"num_warps": 8', '"num_warps": 4')
assert EDIT != STARTER
PLAYBOOK_LINE = max((ROOT / "program.md").read_text().splitlines(), key=len)  # a distinctive one
BUILD_LEFTOVERS = shutil.ignore_patterns(
    ".git", "build", "dist", "*.egg-info", "__pycache__", ".*cache"
)


@pytest.fixture(scope="module")
def installed(tmp_path_factory) -> Path:
    """The `bin` folder of a fresh virtualenv holding only the wheel (torch and the other
    dependencies are the running interpreter's, seen through a .pth file)."""
    tmp = tmp_path_factory.mktemp("wheel")
    source = tmp / "source"  # a copy: a stale build/ folder in the checkout would ship old files
    shutil.copytree(ROOT, source, symlinks=True, ignore=BUILD_LEFTOVERS)
    build = subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "-q", str(source), "-w", str(tmp)],
        capture_output=True, text=True, timeout=600,
    )  # fmt: skip
    assert build.returncode == 0, build.stdout + build.stderr
    (wheel,) = tmp.glob("*.whl")
    assert wheel.name.startswith(DISTRIBUTION.replace("-", "_") + "-")
    top = {name.split("/")[0] for name in zipfile.ZipFile(wheel).namelist()}
    assert {t for t in top if not t.endswith(".dist-info")} == {"autokernel"}
    venv = tmp / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--system-site-packages", str(venv)], check=True)
    bin_dir = venv / "bin"
    purelib = subprocess.run(
        [bin_dir / "python", "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
        capture_output=True, text=True, check=True,
    ).stdout.strip()  # fmt: skip
    (Path(purelib) / "_running_interpreter.pth").write_text("\n".join(site.getsitepackages()))
    pip = subprocess.run(
        [bin_dir / "python", "-m", "pip", "install", "-q", "--no-deps", str(wheel)],
        capture_output=True, text=True, timeout=600,
    )  # fmt: skip
    assert pip.returncode == 0, pip.stdout + pip.stderr
    return bin_dir


@pytest.fixture(scope="module")
def project(tmp_path_factory) -> Path:
    """A user's folder, outside the checkout, whose own modules shadow ours if we let them."""
    where = tmp_path_factory.mktemp("project")
    for name in ("reference", "orchestrate"):
        (where / f"{name}.py").write_text(f"raise ImportError('the user\\'s own {name}.py')\n")
    (where / "kernels").mkdir()
    (where / "kernels" / "__init__.py").write_text("raise ImportError('another kernels')\n")
    shutil.copy(ROOT / "examples" / "single_op.py", where / "model.py")
    return where


def _run(bin_dir: Path, cwd: Path, *args: str, env: dict | None = None, timeout: float = 600):
    environ = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    environ |= {"PYTHONPATH": str(cwd), "COLUMNS": "100", **(env or {})}
    out = subprocess.run(
        [str(bin_dir / args[0]), *args[1:]], cwd=cwd, env=environ, capture_output=True,
        text=True, timeout=timeout,
    )  # fmt: skip
    assert "Traceback" not in out.stderr, out.stderr[-3000:]
    return out


def test_the_wheel_imports_its_own_files(installed, project):
    out = subprocess.run(
        [installed / "python", "-c",
         "import autokernel, autokernel.reference as r, autokernel.shipped as s\n"
         "print(autokernel.__file__); print(r.__file__); print(s.PROGRAM); print(s.STARTERS)"],
        cwd=project, capture_output=True, text=True, env={**os.environ, "PYTHONPATH": str(project)},
    )  # fmt: skip
    assert out.returncode == 0, out.stderr
    venv = installed.parent.resolve()
    paths = [Path(p).resolve() for p in out.stdout.split()]
    assert all(p.is_relative_to(venv) and p.exists() for p in paths), paths
    assert (paths[3] / "softmax.py").is_file()


def test_readme_commands_from_the_wheel(installed, project):
    ak = lambda *a, **kw: _run(installed, project, "autokernel", *a, **kw)
    assert ak("--version").stdout.startswith(f"autokernel {__version__} ")
    assert ak("gpu").returncode == 0
    bench = ak("bench", "--kernel", "softmax", "--quick")
    assert bench.returncode == 0 and "PASS" in bench.stdout, bench.stdout + bench.stderr
    prof = ak("profile", "model.py")
    assert prof.returncode == 0 and (project / "plan.yaml").is_file(), prof.stdout + prof.stderr
    run = ak("run", "--max-experiments", "2", "--quick", "--quiet")
    assert run.returncode == 0, run.stdout + run.stderr
    assert [r["agent"] for r in ResultsLog(project / "results.tsv").read()] == ["starter", "tuner"]
    # python -m puts the current folder, with the user's reference.py, first on sys.path
    status = _run(installed, project, "python", "-m", "autokernel", "status")
    assert status.returncode == 0 and "softmax" in status.stdout, status.stdout + status.stderr
    report = ak("report")
    assert report.returncode == 0 and (project / "progress.png").is_file(), report.stderr
    verify = ak("verify", "model.py")
    assert verify.returncode == 0, verify.stdout + verify.stderr


def test_llm_agents_from_the_wheel(installed, project, tmp_path):
    ws = tmp_path / "openai"
    with ScriptedLLMServer([reply(f"HYPOTHESIS: four warps\n```python\n{EDIT}```\n")]) as server:
        out = _run(
            installed, project, "autokernel", "run", "--kernel", "softmax", "--agent", "openai",
            "--llm-model", "m", "--base-url", server.openai_url, "--max-experiments", "2",
            "--quick", "--quiet", "--workspace", str(ws), env={"OPENAI_API_KEY": "sk-wheel-test"},
        )  # fmt: skip
        requests = server.requests
    assert out.returncode == 0, out.stdout + out.stderr
    assert ResultsLog(ws / "results.tsv").read()[1]["agent"] == "openai:m"
    assert PLAYBOOK_LINE in requests[0].body["messages"][0]["content"]  # program.md, from the wheel

    ws = tmp_path / "command"
    script = tmp_path / "agent.py"
    answer = f"HYPOTHESIS: four warps\n```python\n{EDIT}```"
    script.write_text(f"import sys\nsys.stdin.read()\nprint({answer!r})\n")
    out = _run(
        installed, project, "autokernel", "run", "--kernel", "softmax", "--agent", "command",
        "--agent-command", f"{installed / 'python'} {script}", "--max-experiments", "2", "--quick",
        "--quiet", "--workspace", str(ws),
    )  # fmt: skip
    assert out.returncode == 0, out.stdout + out.stderr
    assert ResultsLog(ws / "results.tsv").read()[1]["agent"].startswith("command:")
