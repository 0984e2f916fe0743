"""Guards that keep a candidate from faking speed or correctness.

Two layers. The static check (static_check.py) reads kernel.py's syntax tree in the parent
(nothing is imported): only allow-listed modules, members and builtins, torch only for
allocation and metadata, no I/O, no reflection, no rebinding of anything. The runtime monitor
records every aten op that kernel_fn issues while the harness calls it, so `x @ w` or a torch
fallback hidden behind operators is caught too.
"""

from __future__ import annotations

import ast

import torch
from torch.utils._python_dispatch import TorchDispatchMode

from autokernel import syntax
from autokernel.harness.guard_lists import (  # noqa: F401 (re-exported: the guard's lists)
    ALLOWED_BUILTINS,
    ALLOWED_IMPORTS,
    ALLOWED_TORCH,
    ESCAPE_ATTRS,
    FORBIDDEN_CALLS,
    FORBIDDEN_METHODS,
    STREAM_ATTRS,
)
from autokernel.harness.static_check import (  # noqa: F401 (re-exported)
    Finding,
    UnjudgeableSource,
    check_source,
)

# aten ops kernel_fn may issue at run time: allocation, views, copies. The Triton interpreter's
# own argument marshalling (new_empty, set_, copy_) is in here too. Reading elements to the host
# (_local_scalar_dense: .item(), float(x[i])) is not: it is how host-side math would start.
ALLOWED_ATEN = frozenset(
    {"empty", "empty_strided", "empty_like", "new_empty", "new_empty_strided", "new_zeros",
     "zeros", "zeros_like", "ones", "ones_like", "full", "full_like", "fill_", "zero_", "arange",
     "view", "_unsafe_view", "reshape", "as_strided", "t", "transpose", "permute", "expand",
     "unsqueeze", "squeeze", "select", "slice", "narrow", "detach", "alias", "clone", "copy_",
     "_to_copy", "set_", "lift_fresh", "lift_fresh_copy", "resize_", "unbind", "split",
     "view_as", "is_same_size", "contiguous"}
)  # fmt: skip


def literal_assignment(source: str, name: str) -> object | None:
    """The value of a top-level `NAME = <literal>` in the source, without importing it; None
    when there is none or the source does not parse."""
    try:
        body = syntax.parse(source).body
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return None
    for node in body:
        if isinstance(node, ast.Assign) and any(
            isinstance(t, ast.Name) and t.id == name for t in node.targets
        ):
            try:
                return ast.literal_eval(node.value)
            except (ValueError, TypeError, SyntaxError, RecursionError, MemoryError):
                return None
    return None


# Tensor methods that read element values on the host without an aten op the mode would see:
# repr formats with every dispatch mode switched off (str, print, format and f-strings all end
# there), and tolist/map_/map2_/apply_ walk CPU memory in C++. repr of an int32 view printed a
# tensor's exact bits, and a softmax computed from them in Python passed every stage. The
# static guard refuses the method names; these wrappers catch whatever reaches them anyway.
HOST_READS = ("__repr__", "tolist", "map_", "map2_", "apply_")
_UNSET = object()


def _recording(name: str, original, seen: list[str]):
    def read(self, *args, **kwargs):
        what = f"Tensor.{name} (reads element values on the host)"
        if what not in seen:
            seen.append(what)
        return original(self, *args, **kwargs)

    return read


class TorchOpMonitor(TorchDispatchMode):
    """Records aten ops outside ALLOWED_ATEN issued while kernel_fn runs, and host reads of
    element values (HOST_READS), and lets them run, so the candidate behaves as it would
    unobserved; the verdict rejects it afterwards."""

    def __init__(self) -> None:
        super().__init__()
        self.forbidden: list[str] = []
        self._saved: dict[str, object] = {}

    def __enter__(self):
        for name in HOST_READS:
            self._saved[name] = vars(torch.Tensor).get(name, _UNSET)
            original = getattr(torch.Tensor, name)
            setattr(torch.Tensor, name, _recording(name, original, self.forbidden))
        return super().__enter__()

    def __exit__(self, *exc):
        try:
            return super().__exit__(*exc)
        finally:
            for name, saved in self._saved.items():
                if saved is _UNSET:
                    delattr(torch.Tensor, name)  # the method lives on torch._C.TensorBase
                else:
                    setattr(torch.Tensor, name, saved)
            self._saved.clear()

    @classmethod
    def _should_skip_dynamo(cls) -> bool:
        """False: torch would wrap __torch_dispatch__ in torch._dynamo.disable, and the first
        dispatch would import torch._dynamo (sympy, torch.distributed with it): 2.5 s of every
        worker's start-up on a CPU box, as long as torch's own import. Nothing is compiled
        under this mode, so there is nothing for Dynamo to skip."""
        return False

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        name = func.overloadpacket.__name__
        if name not in ALLOWED_ATEN and str(func) not in self.forbidden:
            self.forbidden.append(str(func))
        return func(*args, **(kwargs or {}))
