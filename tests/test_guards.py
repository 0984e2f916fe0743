"""The static guard: what kernel.py may and may not contain, judged without importing it."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from autokernel.harness.guards import (
    TorchOpMonitor,
    UnjudgeableSource,
    check_source,
    literal_assignment,
)
from autokernel.harness.sandbox import Options, evaluate
from autokernel.harness.verdict import Status

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


# Each of these was accepted by the blocklist guard and gives code execution, a forged PASS or a
# torch fallback in the worker (issue 14).
ESCAPES = {
    "methodcaller": "import operator\ndef kernel_fn(x):\n    return operator.methodcaller("
    "'softmax', -1)(x)\n",
    "attrgetter on a module": "import operator\nf = operator.attrgetter('runtime')(triton)\n",
    "__builtins__ subscript": "def kernel_fn(x):\n    __builtins__['open']('/tmp/o', 'w')\n",
    "open by reference": "def kernel_fn(x):\n    f = open\n    f('/tmp/o', 'w')\n",
    "open when a shadow is skipped": "if 0:\n    open = None\nopen('/tmp/o', 'w')\n",
    "open in a jit body": "@triton.jit\ndef _k(X):\n    open('/tmp/o', 'w')\n",
    "host helper in a jit body": "def h():\n    return 1\n@triton.jit\ndef _k(X):\n    h()\n",
    "callable passed to a jit body": "@triton.jit\ndef _k(X, F: tl.constexpr):\n    F()\n",
    "torch in a jit body": "@triton.jit\ndef _k(X):\n    torch.softmax(X, -1)\n",
    "rebind a Tensor method": "torch.Tensor.allclose = lambda *a, **k: True\n",
    "rebind through an alias": "T = torch.Tensor\nT.equal = lambda *a: True\n",
    "rebind through type()": "def kernel_fn(x):\n    type(x).equal = lambda *a: True\n",
    "delete a module attribute": "del triton.cdiv\n",
    "assign into a module": "triton.language.extra.modules['x'] = 1\n",
    "annotation runs at import": "def kernel_fn(x: open('/tmp/o', 'w')):\n    return x\n",
    "importlib behind tl.extra": "def kernel_fn(x):\n    return tl.extra.module_from_spec\n",
    "triton.runtime": "def kernel_fn(x):\n    return triton.runtime.driver.active\n",
    "typing evaluates strings": "import typing\ntyping.get_type_hints(kernel_fn)\n",
    "singledispatch evaluates strings": "import functools\n@functools.singledispatch\ndef f(a):\n"
    "    pass\n",
    "generator frame": "def g():\n    yield 1\nb = g().gi_frame.f_builtins\n",
    "a jit function's globals": "@triton.jit\ndef _k(X):\n    pass\ng = _k.get_capture_scope()\n",
    "Tensor subclass": "class T(torch.Tensor):\n    pass\n",
    "type() builds a class": "A = type('A', (object,), {})\n",
    "dunder method": "class A:\n    def __eq__(self, other):\n        return True\n",
    "metaclass": "class A(metaclass=object):\n    pass\n",
    "module passed as a value": "def kernel_fn(x, m=tl):\n    return x\n",
    "star import": "from triton.language import *\n",
    "unbound Tensor method": "def kernel_fn(x):\n    return torch.Tensor.add(x, x)\n",
    "rebinding an import": "def kernel_fn(x):\n    global torch\n    torch = None\n",
    "host helper in a nested jit body": "def h():\n    return 1\ndef kernel_fn(x):\n"
    "    @triton.jit\n    def _k(X):\n        h()\n",
    "a torch module bare": "import torch.utils.cpp_extension as ext\nf = ext\n",
    # host C++ that no guard judged: CUDA kernels build through autokernel.cuda_build only
    "torch's extension builder": "from torch.utils.cpp_extension import load_inline\n",
    "torch's extension builder by path": "import torch\ntorch.utils.cpp_extension.load('x', [])\n",
    "the CUDA builder's internals": "from autokernel.cuda_build import compile_cubin\n",
    "the CUDA driver module": "from autokernel.cuda_driver import load_module\n",
    # names the file never binds, or binds under a dunder spelled as a plain string
    "a global only the run time defines": "def kernel_fn(x):\n    return inspect.stack()\n",
    "a global bound on one path only": "if torch.cuda.is_available():\n    np = 1\n"
    "def kernel_fn(x):\n    return np\n",
    "a global bound in a loop": "for np in ():\n    pass\ndef kernel_fn(x):\n    return np\n",
    "deleting a module-level name": "inspect = None\ndel inspect\n",
    "deleting it from a function": "inspect = None\ndef f():\n    global inspect\n"
    "    del inspect\n",
    "import as __builtins__": "import torch as __builtins__\n",
    "except as __builtins__": "try:\n    pass\nexcept ValueError as __builtins__:\n    pass\n",
    "a dunder parameter": "def kernel_fn(x, __builtins__=None):\n    return x\n",
    "global __builtins__": "def f():\n    global __builtins__\n",
    "a dunder match capture": "match 1:\n    case __builtins__:\n        pass\n",
    "a class pattern reads a dunder": "match kernel_fn:\n    case object(__globals__=g):\n"
    "        pass\n",
    "a class pattern reads .os": "match triton:\n    case object(os=o):\n        pass\n",
    "str.format reads attributes": "def kernel_fn(x):\n    return '{0.__class__}'.format(x)\n",
    "format_map": "def kernel_fn(x):\n    return '{a}'.format_map({'a': x})\n",
    "functools.wraps sets attributes": "import functools\nw = functools.wraps(kernel_fn)\n",
    "a storage maps a file": "def kernel_fn(x):\n    s = x.untyped_storage()\n"
    "    return s.from_file('/e', False, 1)\n",
}


@pytest.mark.parametrize("body", ESCAPES.values(), ids=ESCAPES.keys())
def test_escapes_are_flagged(body):
    assert findings(body), body


def test_names_bound_on_every_path_may_be_read_anywhere():
    """What honest kernels do: helpers defined after the function that calls them, imports
    with a fallback, a constant per branch, a loop or an except target read where it is bound."""
    body = """
try:
    from triton.language.extra import libdevice
except ImportError:
    raise ImportError("this Triton has no libdevice")
if torch.cuda.is_available():
    WARPS = 8
else:
    WARPS = 4
CONFIGS = []
for block in (64, 128):
    CONFIGS.append(block)
try:
    LIMIT = int("x")
except ValueError as exc:
    LIMIT = len(str(exc))


def kernel_fn(x):
    return _helper(x, WARPS, LIMIT, libdevice.tanh, CONFIGS)


def _helper(x, *rest):
    return x
"""
    assert findings(body) == []


def test_clean_code_that_looks_like_an_escape_passes():
    body = """
import functools
from autokernel.cuda_build import load
from triton.language.extra import libdevice
import math
from typing import Any

CACHE: dict = {}


@functools.lru_cache(maxsize=None)
def _block(n: int) -> int:
    return max(16, min(4096, triton.next_power_of_2(n)))


@triton.jit
def _inner(x):
    return x * 2


@triton.jit
def _k(X, Y, n, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    x = libdevice.tanh(tl.load(X + offs, mask=offs < n, other=0.0).to(tl.float32))
    for _ in range(2):
        x = _inner(x)
    tl.store(Y + offs, x, mask=offs < min(n, BLOCK))


def kernel_fn(x, input=None):
    open = 3  # a local that shadows a builtin is the function's own value
    CACHE[x.shape] = open
    y = torch.empty_like(x)
    _k[(math.ceil(1.0),)](x, y, x.numel(), BLOCK=_block(x.numel()))
    return y if input is None else input
"""
    assert findings(body) == []


@pytest.mark.parametrize("terms", [6000, 200_000])
def test_source_the_parser_cannot_take_is_refused_not_raised(terms):
    src = HEADER + "X = " + " + ".join(["1"] * terms) + "\n"
    with pytest.raises(UnjudgeableSource, match="nested too deeply"):
        check_source(src)


def test_a_long_flat_expression_is_judged():
    assert check_source(HEADER + "X = " + " + ".join(["1"] * 1000) + "\n") == []


@pytest.mark.parametrize(
    "source",
    [HEADER + "X = " + " + ".join(["1"] * 6000) + "\n", HEADER + "X = 1\0\n"],
    ids=["deep", "null byte"],
)
def test_unparsable_kernel_is_a_static_rejection(tmp_path, source):
    path = tmp_path / "kernel.py"
    path.write_text(source)
    v = evaluate(path, Options(prestart=False))
    assert v.status is Status.REJECTED and v.failure.stage == "static", v.message
    assert "\n" not in v.message


def test_literal_assignment_is_none_for_unparsable_source():
    assert literal_assignment("KERNEL_TYPE = 'x'\n" + "Y = " + "-" * 100_000 + "1\n", "X") is None


def test_literal_assignment_reads_without_importing():
    src = "import torch\nKERNEL_TYPE = 'rmsnorm'\nCONFIG = {'B': 2}\nX = compute()\n"
    assert literal_assignment(src, "KERNEL_TYPE") == "rmsnorm"
    assert literal_assignment(src, "CONFIG") == {"B": 2}
    assert literal_assignment(src, "X") is None
    assert literal_assignment(src, "MISSING") is None


@pytest.mark.slow
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


def test_only_the_launch_helpers_of_autokernel_are_importable():
    """Starters share autokernel.launch (cached launch plans); the rest of the package, the
    judge and the harness included, stays out of a candidate's reach."""
    assert check_source("from autokernel.launch import launcher, remember\n") == []
    assert check_source("from autokernel.cuda_build import load\n") == []
    for bad in (
        "from autokernel.harness import judge\n",
        "import autokernel.harness.judge\n",
        "from autokernel.launch import _direct\n",
        "from autokernel import launch\nlaunch.triton.runtime.driver\n",
        "from autokernel.launch import triton\n",
    ):
        assert check_source(bad), bad


@pytest.mark.parametrize(
    "body, rule",
    [
        ("def kernel_fn(x):\n    return '{a}'.format_map({'a': x})\n", ".format_map()"),
        ("def kernel_fn(x):\n    return '{0.__class__}'.format(x)\n", ".format()"),
        ("def kernel_fn(s):\n    return s.from_file('/e', False, 1)\n", ".from_file"),
        ("def kernel_fn(x):\n    return x.untyped_storage()\n", ".untyped_storage"),
        ("def kernel_fn(x):\n    return x.numpy\n", ".numpy"),
    ],
)  # fmt: skip
def test_string_lookups_and_file_maps_are_refused_by_their_own_rule(body, rule):
    # each is refused for what it does, not for something else in the snippet
    got = [str(f) for f in findings(body)]
    assert len(got) == 1 and rule in got[0], got


ASM = (
    "@triton.jit\ndef k(X):\n"
    '    t = tl.inline_asm_elementwise({}, "=r,r", [X], dtype=tl.int32, is_pure=True, pack=1)\n'
)


@pytest.mark.parametrize(
    "asm, needle",
    [
        ('"mov.u64 $0, %globaltimer;"', "%globaltimer"),
        ('"mov.u32 $0, %clock;"', "%clock"),
        ('"mov.u32 $0, %pm0;"', "%pm0"),
        ("ASM_TEXT", "string literal"),
        ('"mov.u32 $0, $1;".upper()', "string literal"),
    ],
)  # fmt: skip
def test_inline_asm_is_a_literal_without_clocks(asm, needle):
    got = findings("ASM_TEXT = 'mov.u32 $0, $1;'\n" + ASM.format(asm))
    assert any(needle in g for g in got), got


def test_inline_asm_that_computes_passes():
    assert findings(ASM.format('"cvt.rn.bf16x2.f32 $0, $1, $1;"')) == []
