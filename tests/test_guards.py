"""The static guard: what kernel.py may and may not contain, judged without importing it."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from autokernel.harness.guards import TorchOpMonitor, check_source, literal_assignment

STARTERS = sorted((Path(__file__).parents[1] / "kernels").glob("[a-z]*.py"))
HEADER = "import torch\nimport triton\nimport triton.language as tl\nKERNEL_TYPE = 'softmax'\n"


def findings(body: str) -> list[str]:
    return [f.what for f in check_source(HEADER + body)]


@pytest.mark.parametrize("path", STARTERS, ids=lambda p: p.stem)
def test_shipped_starters_are_clean(path):
    assert check_source(path.read_text()) == []


def test_allocation_metadata_and_triton_are_allowed():
    body = """
@triton.jit
def _k(X, Y, n, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    x = tl.load(X + offs, mask=offs < n, other=0.0).to(tl.float32)
    tl.store(Y + offs, tl.exp(x - tl.max(x, axis=0)), mask=offs < n)

def kernel_fn(x):
    x = x.contiguous()
    y = torch.empty_like(x)
    n = x.shape[-1]
    if x.is_cuda:
        sms = torch.cuda.get_device_properties(x.device).multi_processor_count
    _k[(1,)](x, y, n, BLOCK=triton.next_power_of_2(n), num_warps=4)
    return y.view(x.shape)
"""
    assert findings(body) == []


@pytest.mark.parametrize(
    ("body", "needle"),
    [
        ("import subprocess\n", "subprocess"),
        ("import socket\n", "socket"),
        ("import ctypes\n", "ctypes"),
        ("import os\n", "os"),
        ("from pathlib import Path\n", "pathlib"),
        ("import numpy as np\n", "numpy"),
        ("import torch.nn.functional as F\n", "torch.nn.functional"),
        ("from torch import matmul\n", "torch.matmul"),
        ("def kernel_fn(x):\n    return torch.softmax(x, -1)\n", "torch.softmax"),
        ("def kernel_fn(x):\n    return x.softmax(-1)\n", ".softmax()"),
        ("def kernel_fn(x):\n    return x.sum(-1)\n", ".sum()"),
        ("def kernel_fn(x):\n    return torch.ops.aten.mm(x, x)\n", "torch.ops"),
        ("def kernel_fn(x):\n    t = torch\n    return t.mm(x, x)\n", "torch.<allowed"),
        ("def kernel_fn(x):\n    return getattr(torch, 'mm')(x, x)\n", "getattr()"),
        ("def kernel_fn(x):\n    return eval('x')\n", "eval()"),
        ("def kernel_fn(x):\n    open('/tmp/out', 'w')\n", "open()"),
        ("def kernel_fn(x):\n    return x.__class__\n", "__class__"),
        ("def kernel_fn(x):\n    return torch._C\n", "._C"),
        ("def kernel_fn(x):\n    s = torch.cuda.Stream()\n", "current stream"),
        ("def kernel_fn(x):\n    return triton.runtime.jit.os.system('ls')\n", ".os"),
        ("def kernel_fn(x):\n    return torch.compile(f)\n", "torch.compile"),
        ("from . import helper\n", "import from"),
    ],
)
def test_forbidden_constructs_are_flagged(body, needle):
    found = findings(body)
    assert any(needle in f for f in found), found


def test_findings_carry_line_numbers():
    (f,) = check_source("import torch\n\n\ndef kernel_fn(x):\n    return x.exp()\n")
    assert f.line == 5


def test_syntax_error_raises():
    with pytest.raises(SyntaxError):
        check_source("def kernel_fn(:\n")


def test_literal_assignment_reads_without_importing():
    src = "import torch\nKERNEL_TYPE = 'rmsnorm'\nCONFIG = {'B': 2}\nX = compute()\n"
    assert literal_assignment(src, "KERNEL_TYPE") == "rmsnorm"
    assert literal_assignment(src, "CONFIG") == {"B": 2}
    assert literal_assignment(src, "X") is None
    assert literal_assignment(src, "MISSING") is None


def test_runtime_monitor_sees_operator_math_but_not_allocation():
    x = torch.randn(4, 4)
    with TorchOpMonitor() as m:
        y = torch.empty_like(x)
        y.copy_(x)
        _ = x.view(16)
    assert m.forbidden == []
    with TorchOpMonitor() as m:
        _ = x @ x
        _ = x * 2
    assert any("mm" in op for op in m.forbidden) and any("mul" in op for op in m.forbidden)
