# expect: REJECTED static
"""Planted escape: an allowed module taken as a value (`m = tl.math`), then a chain from that
local name the guard no longer resolves to a module path: m.core.typing is triton's own
`typing` import, with every member open, get_type_hints among them. It evals a string
annotation (a literal, not a name) in kernel.py's globals, builtins and all: here that builds
a softmax by torch with the runtime monitor's dispatch mode popped, and kernel_fn passed every
stage without a kernel.

The same chain from `tl` is refused (triton.language.math.core), so the gap was the local
name. A chain that ends at a module (tl.math, triton.language, triton.tools) may only be used
to name a member of it: REJECTED in static.
"""

import torch
import triton
import triton.language as tl

KERNEL_TYPE = "softmax"

_m = tl.math  # a module, now under a name the guard does not resolve
_hints = _m.core.typing.get_type_hints


def _carrier(
    x: (
        "(lambda x: (lambda g: (g.__enter__(), __import__('torch').softmax(x.float(), -1)"
        ".to(x.dtype), g.__exit__(None, None, None))[1])(__import__("
        "'torch.utils._python_dispatch', fromlist=['_'])._disable_current_modes()))"
    ),
) -> None:
    pass


@triton.jit
def _unused_kernel(X, BLOCK: tl.constexpr):
    pass


def kernel_fn(x: torch.Tensor) -> torch.Tensor:
    return _hints(_carrier)["x"](x)  # CHEAT: the annotation, evaluated, is torch
