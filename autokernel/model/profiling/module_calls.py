"""Who called each op: module forwards, torch calls and the model's own functions become
profiler ranges, each labelled with the index of a record.

Hooks open a `record_function` range around each module's forward, a TorchFunctionMode one
around each torch call that takes a tensor (x.softmax(-1) as much as torch.softmax), and
wrappers one around each call of a module-level function of the model's modules (a rotary
helper). Each record says what the matcher (autokernel.model.matcher) made of the call: a kernel
type with its real shape and arguments, or nothing, in which case its route key (how verify
would find it again) lets the attribution make it a generic target. The attribution then walks
from each op up to the outermost record that claims it.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

import torch
from torch import nn
from torch.overrides import TorchFunctionMode

from autokernel.model import calls as callnames
from autokernel.model.match import Match
from autokernel.model.matcher import call_note, match_call, match_function, match_module

LABEL_PREFIX = "ak.module::"
CALL_PREFIX = "ak.call::"
FUNCTION_PREFIX = "ak.fn::"
PREFIXES = (LABEL_PREFIX, CALL_PREFIX, FUNCTION_PREFIX)
_OPS = (torch._ops.OpOverload, torch._ops.OpOverloadPacket)


@dataclass
class ModuleCall:
    """One module forward, torch call or model function call (despite the name, which the
    module forwards it began with kept)."""

    path: str  # module path ('layers.0.mlp'; '' for the model); the enclosing module's for calls
    cls: str  # class name, torch call name or function name: what a row shows
    kind: str | None  # the kernel type the whole call computes, None: look inside
    shape: dict[str, int] = field(default_factory=dict)
    dtype: torch.dtype | None = None
    args: dict[str, object] = field(default_factory=dict)
    route: str = "module"  # module, call or function
    key: str = ""  # the route key (autokernel.model.calls): how verify finds the same call
    inputs: str = ""  # the tensors' shapes as called, for a generic row: '8x64, 64'
    note: str = ""  # why a call by a kernel type's name is not that type (matcher.call_note)

    @property
    def pattern(self) -> str:
        """'layers.*.mlp': the path with layer indices folded, so repeated layers group."""
        return callnames.pattern(self.path)


def _record(match: Match | None, first: tuple, **fields: Any) -> ModuleCall:
    call = ModuleCall(kind=match.kind if match else None, **fields)
    if match is not None:
        call.shape, call.dtype, call.args = match.shape, match.dtype, dict(match.args)
    else:
        tensors = callnames.tensors_of(*first)
        call.dtype = tensors[0].dtype if tensors else None
    return call


def _shapes(args: tuple, kwargs: dict) -> str:
    return ", ".join("x".join(map(str, t.shape)) or "scalar"
                     for t in callnames.tensors_of(args, kwargs))  # fmt: skip


def _quiet() -> bool:
    from autokernel.model.kernel_ops import in_op

    return in_op()


class _CallMode(TorchFunctionMode):
    """Labels each torch call that takes a tensor; metadata queries and direct op calls (the
    profiler's own record_function ops among them) pass unlabelled."""

    def __init__(self, recorder: ModuleRecorder) -> None:
        super().__init__()
        self.recorder = recorder

    def __torch_function__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        rec = self.recorder
        if rec.quiet or _quiet() or isinstance(func, _OPS) or callnames.is_metadata(func):
            return func(*args, **kwargs)
        if not callnames.tensors_of(args, kwargs):
            return func(*args, **kwargs)
        rec.quiet = True
        try:
            match = match_call(func, args, kwargs)
            call = _record(match, (args, kwargs), path=rec.where(), route="call",
                           cls=callnames.api_name(func), inputs=_shapes(args, kwargs),
                           key=callnames.call_route(func, args, kwargs))  # fmt: skip
            if match is None:
                call.note = call_note(func, args, kwargs)
            label = rec.add(call, CALL_PREFIX, (func, args, kwargs))
        finally:
            rec.quiet = False
        with torch.profiler.record_function(label):
            return func(*args, **kwargs)


class ModuleRecorder:
    """Installs the hooks on every submodule; `calls[i]` describes range `<prefix>i`.
    Torch calls and model functions are recorded only inside `active()`."""

    def __init__(self, model: nn.Module) -> None:
        self.model = model
        self.calls: list[ModuleCall] = []
        self.quiet = False  # inside our own matching (probes, op arguments): record nothing
        self.grab: set[str] = set()  # route keys whose first call's arguments to keep
        self.examples: dict[str, tuple[Callable, tuple, dict]] = {}
        self._open: list[object] = []
        self._paths: list[str] = []
        self._handles = []
        for path, module in model.named_modules():
            self._handles.append(
                module.register_forward_pre_hook(self._pre(path), with_kwargs=True)
            )
            self._handles.append(module.register_forward_hook(self._post, always_call=True))

    def where(self) -> str:
        return self._paths[-1] if self._paths else ""

    def add(self, call: ModuleCall, prefix: str, example: tuple) -> str:
        self.calls.append(call)
        if call.key in self.grab and call.key not in self.examples:
            fn, args, kwargs = example
            self.examples[call.key] = (fn, *_cloned(args, kwargs))
        return f"{prefix}{len(self.calls) - 1}"

    def _pre(self, path: str):
        def hook(module: nn.Module, args: tuple, kwargs: dict) -> None:
            if self.quiet or _quiet():
                self._open.append(None)
                return
            self.quiet = True
            try:
                call = _record(match_module(module, args, kwargs), (args, kwargs), path=path,
                               cls=type(module).__name__, inputs=_shapes(args, kwargs),
                               key=callnames.module_route(module, path, args, kwargs))  # fmt: skip
                label = self.add(call, LABEL_PREFIX, (module, args, kwargs))
            finally:
                self.quiet = False
            rf = torch.profiler.record_function(label)
            rf.__enter__()
            self._open.append(rf)
            self._paths.append(path)

        return hook

    def _post(self, module: nn.Module, args: tuple, output: object) -> None:
        if self._open:
            rf = self._open.pop()
            if rf is not None:
                self._paths.pop()
                rf.__exit__(None, None, None)

    def _function(self, entry: callnames.ModelFunction) -> Callable:
        fn, run = entry.function, entry.value

        def wrapper(*args: Any, **kwargs: Any) -> Any:
            if self.quiet or _quiet() or not callnames.tensors_of(args, kwargs):
                return run(*args, **kwargs)
            self.quiet = True
            try:
                call = _record(match_function(fn, args, kwargs), (args, kwargs),
                               path=self.where(),
                               cls=fn.__qualname__, route="function", inputs=_shapes(args, kwargs),
                               key=callnames.function_route(fn, args, kwargs))  # fmt: skip
                label = self.add(call, FUNCTION_PREFIX, (run, args, kwargs))
            finally:
                self.quiet = False
            with torch.profiler.record_function(label):
                return run(*args, **kwargs)

        return wrapper

    @contextlib.contextmanager
    def active(self) -> Iterator[None]:
        """Torch calls and the model's functions recorded for the duration."""
        swapped = []
        for entry in callnames.model_functions(self.model):
            swapped.append(entry)
            entry.swap(self._function(entry))
        try:
            with _CallMode(self):
                yield
        finally:
            for entry in reversed(swapped):
                entry.restore()

    def remove(self) -> None:
        for h in self._handles:
            h.remove()
        self._handles.clear()

    def call_of(self, label: str) -> ModuleCall | None:
        for prefix in PREFIXES:
            if label.startswith(prefix):
                return self.calls[int(label.removeprefix(prefix))]
        return None


def _cloned(args: tuple, kwargs: dict) -> tuple[tuple, dict]:
    """A copy of the arguments that later in-place ops of the forward cannot change."""
    values, spec = callnames.leaves(args, kwargs)
    copied = [v.detach().clone() if isinstance(v, torch.Tensor) else v for v in values]
    return callnames.rebuild(spec, copied, [v for v in copied if isinstance(v, torch.Tensor)])
