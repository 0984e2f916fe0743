"""Shared test set-up: CPU by default, GPU tests marked and skipped without CUDA, and a private
cache directory so tests never read or write the user's baselines and ceilings."""

from __future__ import annotations

import pytest
import torch


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
