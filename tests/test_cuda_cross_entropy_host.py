"""The host side of the CUDA cross_entropy starter on a CPU: its one launch gets a workspace
laid out as the kernel reads it (tickets, group slots, block slots for at least grid blocks),
with the tickets at zero, and an outgrown workspace stays alive for graphs that captured it.
The kernel is a stand-in here (the builder needs a GPU); it records what it was launched with.
"""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import pytest
import torch

from autokernel import cuda_build
from autokernel.kernel_file import import_file

PATH = Path(__file__).resolve().parents[1] / "kernels" / "cuda" / "cross_entropy.py"


@pytest.fixture
def starter(monkeypatch):
    launches = []

    def kernel(grid, block, *args):
        launches.append((grid, block, *args))

    names = ("ce_f16", "ce_bf16", "ce_f32")
    monkeypatch.setattr(cuda_build, "load", lambda s, c=None: SimpleNamespace(
        **dict.fromkeys(names, kernel)))  # fmt: skip
    return import_file(PATH, "cuda_cross_entropy_host"), launches


@pytest.mark.parametrize("rows,cols", [(0, 8), (1, 1), (5, 1023), (4096, 33), (70001, 16)])
def test_one_launch_with_a_workspace_the_kernel_can_index(starter, rows, cols):
    mod, launches = starter
    out = mod.kernel_fn(torch.randn(rows, cols), torch.zeros(rows, dtype=torch.int64))
    assert out.shape == () and out.dtype == torch.float32
    ((grid, block, _, _, ws, out_arg, n, c, xs, g, cap),) = launches
    assert out_arg is out and (n, c, xs) == (rows, cols, cols)
    assert 1 <= grid <= cap and grid * (block // g) >= rows
    capg = -(-cap // mod.GROUP)
    assert ws.dtype == torch.int32 and ws.numel() == 1 + 3 * capg + 2 * cap
    assert not ws[: 1 + capg].any(), "the tickets start at zero"


def test_an_outgrown_workspace_is_kept_alive(starter):
    mod, launches = starter
    mod.kernel_fn(torch.randn(8, 64), torch.zeros(8, dtype=torch.int64))
    first = launches[-1][4]
    mod.kernel_fn(torch.empty(5000, 4096), torch.zeros(5000, dtype=torch.int64))  # a block a row
    assert launches[-1][0] == 5000 and launches[-1][4] is not first
    assert any(w is first for w in mod._RETIRED)
    mod.kernel_fn(torch.randn(8, 64), torch.zeros(8, dtype=torch.int64))
    assert launches[-1][4] is launches[-2][4], "a smaller call reuses the larger workspace"
