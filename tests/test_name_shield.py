"""Run from the checkout's root, our top-level kernels/ must not stand in for an installed
`kernels` distribution (transformers >= 5 imports Hugging Face's; CI failed on exactly that)."""

import importlib
import sys

import pytest

from autokernel.model.name_shield import MARK, shield_kernels_name


@pytest.fixture
def clean_modules():
    """sys.modules and sys.path as they were, whatever the test imported under `kernels`."""
    saved_module, saved_path = sys.modules.pop("kernels", None), list(sys.path)
    yield
    sys.modules.pop("kernels", None)
    if saved_module is not None:
        sys.modules["kernels"] = saved_module
    sys.path[:] = saved_path


def _package(root, body):
    (root / "kernels").mkdir(parents=True)
    (root / "kernels" / "__init__.py").write_text(body)
    return str(root)


@pytest.mark.parametrize("as_cwd", [False, True], ids=["root-entry", "cwd-entry"])
def test_installed_distribution_wins_over_ours(tmp_path, clean_modules, monkeypatch, as_cwd):
    ours = _package(tmp_path / "checkout", f"{MARK} = True\n")
    installed = _package(tmp_path / "site", "CUDAProperties = 'hub'\n")
    if as_cwd:
        monkeypatch.chdir(ours)
        ours = ""
    sys.path[:] = [ours, installed]
    assert shield_kernels_name() == "installed"
    kernels = importlib.import_module("kernels")  # the name under test, not our package
    assert kernels.CUDAProperties == "hub"
    assert sys.path == [ours, installed]  # the path is left as the user had it


def test_ours_stays_when_nothing_is_installed(tmp_path, clean_modules):
    ours = _package(tmp_path / "checkout", f"{MARK} = True\n")
    sys.path[:] = [ours]
    assert shield_kernels_name() == "absent"
    kernels = importlib.import_module("kernels")  # the name under test, not our package
    assert getattr(kernels, MARK) is True


def test_someone_elses_kernels_first_is_left_alone(tmp_path, clean_modules):
    theirs = _package(tmp_path / "theirs", "WHO = 'them'\n")
    ours = _package(tmp_path / "checkout", f"{MARK} = True\n")
    sys.path[:] = [theirs, ours]
    assert shield_kernels_name() == "clear"
    assert "kernels" not in sys.modules


def test_the_repository_starters_carry_the_mark():
    from pathlib import Path

    root = Path(__file__).resolve().parents[1]
    assert MARK in (root / "kernels" / "__init__.py").read_text()
