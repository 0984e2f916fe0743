"""What a call is, for profile and verify alike: a name for the callee and a signature for its
arguments, so a target found in one is recognized in the other.

Calls reach the matcher three ways: torch functions and tensor methods through a
TorchFunctionMode (x.softmax(-1), torch.softmax and F.softmax all arrive there, each under its
own name), module forwards through hooks or replaced forwards, and module-level functions of the
model's own modules through swapped globals. The signature keeps what a kernel's correctness
depends on and nothing else: dtypes, ranks, which dims are 1, the layout order, and every
non-tensor argument; not the sizes, which a generic kernel takes as they come.
"""

from __future__ import annotations

import itertools
import json
import re
import types
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import torch
from torch import nn
from torch.utils import _pytree as pytree

_NAMES: dict[int, str] = {}
# Tensor methods and torch functions that only read metadata or convert to Python: never a
# kernel, and labelling each would cost a profiler range per shape query.
METADATA = frozenset(
    {"size", "dim", "stride", "numel", "element_size", "is_contiguous", "is_floating_point",
     "data_ptr", "storage_offset", "__len__", "__repr__", "__format__", "__bool__", "__index__",
     "__int__", "__float__", "item", "tolist", "__iter__", "__hash__", "__eq__", "__ne__",
     "__reduce_ex__", "__deepcopy__", "__setstate__", "__array__", "numpy", "dim_order",
     "is_complex", "get_device", "untyped_storage", "has_names", "__contains__", "__dlpack__"}
)  # fmt: skip


def api_name(func: Callable) -> str:
    """'Tensor.softmax', 'torch.softmax', 'torch.nn.functional.gelu' (the name the callee has
    where the model found it; cached per callable)."""
    key = id(func)
    name = _NAMES.get(key)
    if name is None:
        name = _name(func)
        _NAMES[key] = name
    return name


def _name(func: Callable) -> str:
    qual = getattr(func, "__qualname__", None) or getattr(func, "__name__", None) or repr(func)
    if qual.startswith(("TensorBase.", "_TensorBase.")):
        qual = "Tensor." + qual.split(".", 1)[1]
    if qual.startswith("Tensor."):
        return qual
    if qual.startswith("_VariableFunctionsClass."):  # torch.softmax, torch.sum, ...
        return "torch." + qual.split(".", 1)[1]
    module = getattr(func, "__module__", None) or ""
    objclass = getattr(func, "__objclass__", None)
    if objclass is not None and issubclass(objclass, torch._C.TensorBase):
        return f"Tensor.{getattr(func, '__name__', qual)}"
    module = {"torch._C._nn": "torch.nn.functional", "torch._C._VariableFunctions": "torch",
              "torch._C._linalg": "torch.linalg", "torch._C._special": "torch.special"}.get(
        module, module)  # fmt: skip
    if "<locals>" in qual and module:  # F.max_pool2d: boolean_dispatch.<locals>.fn
        name = getattr(func, "__name__", "")
        if name and resolve(f"{module}.{name}") is func:
            return f"{module}.{name}"  # the name the model calls it by, which verify resolves
    return f"{module}.{qual}" if module else qual


def is_metadata(func: Callable) -> bool:
    name = api_name(func)
    return name.rsplit(".", 1)[-1] in METADATA or name.endswith(".__get__")


def leaves(args: tuple, kwargs: dict) -> tuple[list, pytree.TreeSpec]:
    return pytree.tree_flatten((args, kwargs))


def tensors_of(args: tuple, kwargs: dict) -> list[torch.Tensor]:
    return [x for x in leaves(args, kwargs)[0] if isinstance(x, torch.Tensor)]


def rebuild(spec: pytree.TreeSpec, values: list, tensors: list[torch.Tensor]) -> tuple:
    """(args, kwargs) with the tensor leaves replaced by `tensors`, in order."""
    it: Iterator[torch.Tensor] = iter(tensors)
    filled = [next(it) if isinstance(v, torch.Tensor) else v for v in values]
    return pytree.tree_unflatten(filled, spec)


def _tensor_leaf(t: torch.Tensor) -> dict:
    ones = "".join("1" if n == 1 else "n" for n in t.shape)
    if t.is_contiguous():
        return {"t": str(t.dtype).removeprefix("torch."), "ones": ones, "order": "c"}
    order = sorted(range(t.dim()), key=lambda d: -t.stride(d))
    return {"t": str(t.dtype).removeprefix("torch."), "ones": ones,
            "order": "".join(map(str, order))}  # fmt: skip


def _value_leaf(v: Any) -> dict:
    if isinstance(v, torch.dtype):
        return {"dtype": str(v).removeprefix("torch.")}
    if v is None or isinstance(v, bool | int | str) or (isinstance(v, float) and v == v):
        return {"v": v}
    return {"repr": repr(v) if isinstance(v, float | slice) else f"<{type(v).__name__}>"}


def signature(args: tuple, kwargs: dict) -> str:
    """The call's arguments as the matcher keys them (see the module docstring)."""
    values, spec = leaves(args, kwargs)
    parts = [_tensor_leaf(v) if isinstance(v, torch.Tensor) else _value_leaf(v) for v in values]
    return f"{_spec_text(spec)}|{json.dumps(parts, sort_keys=True)}"


def _spec_text(spec: pytree.TreeSpec) -> str:
    return re.sub(r"\s+", "", str(spec))[:400].replace("|", "/")


class Expectation:
    """A route's signature as checks a call can be held to: what verify runs per call, written
    so torch.compile traces it (comparisons of dtypes, dims and values; no string building)."""

    def __init__(self, route: str) -> None:
        self.leaves: list[dict] = json.loads(route.rsplit("|", 1)[1])
        self.dtypes = {i: getattr(torch, leaf["t"]) for i, leaf in enumerate(self.leaves)
                       if "t" in leaf}  # fmt: skip

    def matches(self, args: tuple, kwargs: dict) -> bool:
        values, _ = leaves(args, kwargs)
        if len(values) != len(self.leaves):
            return False
        for i, (v, leaf) in enumerate(zip(values, self.leaves, strict=True)):
            if "t" in leaf:
                if not isinstance(v, torch.Tensor) or not _tensor_fits(v, leaf, self.dtypes[i]):
                    return False
            elif isinstance(v, torch.Tensor):
                return False
            elif "v" in leaf and not (type(v) is type(leaf["v"]) and v == leaf["v"]):
                return False
            elif "dtype" in leaf and v != getattr(torch, leaf["dtype"]):
                return False
            elif "repr" in leaf and not isinstance(v, float | slice):
                return False
        return True


def _tensor_fits(t: torch.Tensor, leaf: dict, dtype: torch.dtype) -> bool:
    ones = leaf["ones"]
    if t.dtype != dtype or t.dim() != len(ones):
        return False
    for n, one in zip(t.shape, ones, strict=True):
        if (n == 1) != (one == "1"):
            return False
    if leaf["order"] == "c":
        return t.is_contiguous()
    order = [int(c) for c in leaf["order"]]
    return all(t.stride(a) >= t.stride(b) for a, b in itertools.pairwise(order))


def pattern(path: str) -> str:
    """'layers.*.mlp': a module path with layer indices folded, so repeated layers group."""
    return re.sub(r"\.\d+(?=\.|$)", ".*", path) or "(model)"


def module_route(module: nn.Module, path: str, args: tuple, kwargs: dict) -> str:
    cls = type(module)
    return f"module:{cls.__module__}.{cls.__qualname__}@{pattern(path)}|{signature(args, kwargs)}"


def function_route(fn: types.FunctionType, args: tuple, kwargs: dict) -> str:
    return f"function:{fn.__module__}.{fn.__qualname__}|{signature(args, kwargs)}"


def call_route(func: Callable, args: tuple, kwargs: dict) -> str:
    return f"call:{api_name(func)}|{signature(args, kwargs)}"


def route_head(route: str) -> str:
    """What a route names before its signature: 'call:Tensor.softmax', 'module:...@path'."""
    return route.split("|", 1)[0]


def resolve(name: str) -> Callable | None:
    """The callable a call name names ('Tensor.softmax' -> torch.Tensor.softmax), or None."""
    parts = name.split(".")
    obj: Any = torch.Tensor if parts[0] == "Tensor" else (torch if parts[0] == "torch" else None)
    for part in parts[1:]:
        obj = getattr(obj, part, None)
    return obj if callable(obj) else None


def module_tensors(module: nn.Module) -> list[torch.Tensor]:
    """A module region's extra inputs after the call's own: its parameters, then its buffers
    (profile traces it so, verify passes them so)."""
    return [t for _, t in module.named_parameters()] + [t for _, t in module.named_buffers()]


# ---- the model's own module-level functions ---------------------------------------------------


def model_globals(model: nn.Module) -> list[dict]:
    """The globals of the modules defining the model's classes (torch's own left out: its
    functions are reached through the TorchFunctionMode)."""
    dicts: dict[int, dict] = {}
    for m in model.modules():
        g = getattr(type(m).forward, "__globals__", None)
        if g is not None and not str(g.get("__name__", "")).startswith("torch"):
            dicts[id(g)] = g
    return list(dicts.values())


@dataclass(frozen=True)
class ModelFunction:
    """A module-level function of the model's code, as its forward finds it by name. `value` is
    what the global holds and what runs: the function itself, or an object wrapping it (recent
    transformers turn apply_rotary_pos_emb into an nn.Module that dispatches to hub kernels when
    the `kernels` package is installed). `function` is the plain function inside: its module,
    name and signature identify the call, whatever wraps it."""

    globals: dict
    name: str
    value: Callable
    function: types.FunctionType

    def swap(self, replacement: Callable) -> None:
        self.globals[self.name] = replacement

    def restore(self) -> None:
        self.globals[self.name] = self.value


def model_functions(model: nn.Module) -> list[ModelFunction]:
    """Every plain function the model's modules define, bare or wrapped: what a forward may call
    by name (transformers' apply_rotary_pos_emb, rotate_half, ...)."""
    out = []
    dicts = model_globals(model)
    own = {str(g.get("__name__")) for g in dicts}
    submodules = {id(m) for m in model.modules()}
    for g in dicts:
        for name, value in list(g.items()):
            if name.startswith("__") or id(value) in submodules:
                continue
            fn = value if isinstance(value, types.FunctionType) else wrapped_function(value, name)
            if fn is not None and fn.__module__ in own:
                out.append(ModelFunction(g, name, value, fn))
    return out


def wrapped_function(value: object, name: str) -> types.FunctionType | None:
    """The function named `name` that a callable object wraps: through `__wrapped__`
    (functools.wraps), `.func` (functools.partial) or a closure of its class's forward or
    __call__ (a decorator that builds a class per function). None for anything else: classes,
    modules, plain data."""
    if isinstance(value, type | types.ModuleType) or not callable(value):
        return None
    candidates = [getattr(value, "__wrapped__", None), getattr(value, "func", None)]
    for attr in ("forward", "__call__"):
        method = getattr(type(value), attr, None)
        for cell in getattr(method, "__closure__", None) or ():
            try:
                candidates.append(cell.cell_contents)
            except ValueError:  # an empty cell
                continue
    for fn in candidates:
        if isinstance(fn, types.FunctionType) and fn.__name__ == name:
            return fn
    return None
