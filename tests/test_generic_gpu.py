"""On the GPU a generic starter carries the code Inductor compiled for the model's own shape,
with the blocks Inductor's autotuner kept there; it computes the region at that shape and at
others (the any-shape kernels)."""

from __future__ import annotations

import importlib.util
import itertools

import pytest
import torch

from autokernel.model import generic_starter
from autokernel.model.capture import capture
from autokernel.model.generic_starter import starter_for
from autokernel.model.inductor_code import generate

pytestmark = pytest.mark.gpu


def test_an_outer_sum_starts_from_the_blocks_inductor_autotuned(tmp_path, monkeypatch):
    cuda = torch.device("cuda")
    x = torch.randn(64, 1024, 256, device=cuda, dtype=torch.bfloat16)
    region = capture(lambda t: torch.sum(t, dim=1), [x], "sum_middle")
    # The blocks of the very compile the starter was built from: a second autotune can pick
    # another of two near-tied candidates (seen on an H100).
    static = []

    def recorded(region, device, dynamic=True):
        code = generate(region, device, dynamic=dynamic)
        if not dynamic:
            static.append(code)
        return code

    monkeypatch.setattr(generic_starter, "generate", recorded)
    monkeypatch.setattr(generic_starter, "_MADE", {})  # built here, not read from an earlier test
    source = starter_for(region.to_dict(), cuda)
    assert len(static) == 1, "the starter was not built from a static-shape compile"
    chosen = static[0].chosen
    assert chosen, "Inductor's autotuner left no launch to read"
    assert "AT_SHAPE" in source
    path = tmp_path / "kernel.py"
    path.write_text(source)
    spec = importlib.util.spec_from_file_location("generic_gpu_starter", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    for name, launch in chosen.items():
        i = next(k for k, n in enumerate(_kernel_order(source)) if n == name + "_at_shape")
        mine = {k.rsplit("_", 1)[0]: v for k, v in module.CONFIG.items()
                if k.rsplit("_", 1)[1] == str(i)}  # fmt: skip
        assert mine and all(launch[k] == v for k, v in mine.items()), (mine, launch)
    for t in (x, torch.randn(8, 96, 40, device=cuda, dtype=torch.bfloat16)):
        want = torch.sum(t.double(), dim=1)
        torch.testing.assert_close(module.kernel_fn(t).double(), want, rtol=2e-2, atol=2e-1)


def _kernel_order(source: str) -> list[str]:
    """The @triton.jit kernels' names in the file's order (CONFIG's key suffixes)."""
    names = []
    lines = source.splitlines()
    for a, b in itertools.pairwise(lines):
        if a.strip() == "@triton.jit" and b.startswith("def "):
            names.append(b[4 : b.index("(")])
    return names
