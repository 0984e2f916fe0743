"""Shared test set-up: CPU by default, GPU tests marked and skipped without CUDA, and a private
cache directory so tests never read or write the user's baselines and ceilings."""

from __future__ import annotations

import os

import pytest
import torch

if not torch.cuda.is_available():
    # Test modules import triton at collection, in any order: the interpreter must be on first
    # (Triton reads the variable once), as autokernel's own modules arrange for a real run.
    os.environ.setdefault("TRITON_INTERPRET", "1")


def pytest_collection_modifyitems(config, items):
    if torch.cuda.is_available():
        return
    skip = pytest.mark.skip(reason="needs CUDA (run on the GPU machine)")
    for item in items:
        if "gpu" in item.keywords:
            item.add_marker(skip)


@pytest.fixture(autouse=True, scope="session")
def _private_cache(tmp_path_factory):
    mp = pytest.MonkeyPatch()
    mp.setenv("AUTOKERNEL_CACHE_DIR", str(tmp_path_factory.mktemp("autokernel-cache")))
    yield
    mp.undo()
