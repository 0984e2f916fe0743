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


# The longest tests (whole CLI runs in subprocesses, 20-90 s each on two cores), started first:
# xdist hands out tests in collection order, and these came last alphabetically, where one
# of them could keep a worker busy after the other had run out of tests.
LONGEST_FIRST = ("test_generic_night.py", "test_parallel_run.py", "test_wheel.py",
                 "test_ops_benchmark.py", "test_run_cli.py")  # fmt: skip


def pytest_collection_modifyitems(config, items):
    rank = {name: i for i, name in enumerate(LONGEST_FIRST)}
    items.sort(key=lambda item: rank.get(item.path.name, len(rank)))  # stable: order kept within
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
