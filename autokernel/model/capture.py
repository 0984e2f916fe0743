"""Trace one region of a model into a Region description (autokernel.specs.region).

The region is a callable over tensors (a module's forward with its parameters passed in, a
module-level function, one torch call). torch.compile traces it with dynamic shapes and
AOTAutograd turns the trace into aten ops without decomposing them, so the description holds
the ops as the model called them (aten.gelu with approximate='tanh', aten._log_softmax over dim
1, the slice, neg and cat of a rotation) and sizes as symbols: the same trace Inductor compiles,
which is why the starter (autokernel.model.starter) and the reference agree by construction.

Duck sizing is off, so two dims that happen to be equal in the model stay two symbols unless an
op ties them (broadcasting, cat): a kernel is not specialized to a coincidence of the model.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Sequence
from typing import Any

import torch

from autokernel.specs.base import dtype_name
from autokernel.specs.region import SYM_OPS, InputSpec, Region, RegionError

_DYNAMO_ARG = re.compile(r"l_args_(\d+)_")  # dynamo's placeholder name for region(*args)[k]
_SYM_NAMES = {fn: name for name, fn in SYM_OPS.items()}
# In-place and random ops: a replay would not reproduce what the model did.
_REFUSED = re.compile(r"aten\.(.*_\.|copy_|bernoulli|rand|normal|native_dropout|dropout|"
                      r"uniform|exponential|multinomial|empty)")  # fmt: skip


class CaptureError(Exception):
    """The region cannot be traced into one graph of aten ops; the message says why."""


def capture(fn: Callable[..., Any], tensors: Sequence[torch.Tensor], title: str = "") -> Region:
    """Trace fn(*tensors) (tensors only; other arguments closed over) into a Region."""
    import torch._dynamo
    import torch.fx.experimental._config as fx_config
    from torch._functorch.aot_autograd import aot_module_simplified

    graphs: list[tuple[list[str], torch.fx.GraphModule]] = []

    def backend(gm: torch.fx.GraphModule, example_inputs: list) -> Callable:
        placeholders = [n for n in gm.graph.nodes if n.op == "placeholder"]
        pairs = zip(placeholders, example_inputs, strict=True)
        names = [_input_name(n, ex, tensors) for n, ex in pairs]

        def forward_graph(fw: torch.fx.GraphModule, _inputs: list) -> Callable:
            graphs.append((names, fw))
            return fw.forward

        return aot_module_simplified(gm, example_inputs, fw_compiler=forward_graph)

    def region(*args: torch.Tensor) -> Any:
        return fn(*args)

    before = [t.clone() for t in tensors]
    # One code object traced for many regions: a fresh cache each time, or the recompile
    # limit would silently run later regions eagerly, untraced.
    torch._dynamo.reset()
    mark_sizes_dynamic(tensors)
    try:
        with fx_config.patch(use_duck_shape=False), torch.no_grad():
            torch.compile(region, backend=backend, fullgraph=True)(*tensors)
    except Exception as exc:  # a graph break, an op dynamo cannot trace: not a region
        message = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
        raise CaptureError(
            f"torch.compile cannot trace it: {type(exc).__name__}: {message}"[:300]
        ) from None
    finally:
        torch._dynamo.reset()
    if len(graphs) != 1:
        raise CaptureError(f"traced into {len(graphs)} graphs, not one")
    if any(not _same(a, b) for a, b in zip(before, tensors, strict=True)):
        raise CaptureError("it writes into its inputs: a replay would not")
    names, fw = graphs[0]
    return _describe(names, fw, list(tensors), title)


def _input_name(node: torch.fx.Node, example: object, tensors: Sequence[torch.Tensor]) -> str:
    """The placeholder's name as l_args_<k>_ when it is the region's k-th tensor: by name for
    the call's arguments, by identity for what the traced code read itself (a module's
    parameters and buffers, which the region lists after the call's tensors)."""
    if _DYNAMO_ARG.fullmatch(node.name) or not isinstance(example, torch.Tensor):
        return node.name
    for k, t in enumerate(tensors):
        same = t is example or (
            t.data_ptr() == example.data_ptr() and t.shape == example.shape
            and t.stride() == example.stride() and t.dtype == example.dtype
        )  # fmt: skip
        if same:
            return f"l_args_{k}_"
    return node.name


def mark_sizes_dynamic(tensors: Sequence[torch.Tensor]) -> None:
    """Every dim above 1 a symbol, and nothing else: dynamic=True would also make the Python
    ints the region closes over (a dim, a size) inputs of the graph."""
    import torch._dynamo

    for t in tensors:
        for d, n in enumerate(t.shape):
            if n > 1:
                torch._dynamo.maybe_mark_dynamic(t, d)


def _same(a: torch.Tensor, b: torch.Tensor) -> bool:
    """Equal, NaNs in the same places included."""
    if a.is_floating_point():
        return bool(((a == b) | (torch.isnan(a) & torch.isnan(b))).all())
    return torch.equal(a, b)


def _describe(names: list[str], fw: torch.fx.GraphModule, tensors: list, title: str) -> Region:
    placeholders = [n for n in fw.graph.nodes if n.op == "placeholder"]
    if len(placeholders) != len(names):
        raise CaptureError("the traced graph's inputs do not line up with the region's")
    index: dict[torch.fx.Node, int] = {}
    nodes: list[dict] = []
    symbols = _symbols(placeholders, names, tensors)
    inputs = [_input_spec(t, None) for t in tensors]
    for node, name in zip(placeholders, names, strict=True):
        val = node.meta.get("val")
        m = _DYNAMO_ARG.fullmatch(name)
        if isinstance(val, torch.Tensor):
            if m is None:
                raise CaptureError(f"the traced graph reads {name}, not one of the region's inputs")
            k = int(m.group(1))
            inputs[k] = _input_spec(tensors[k], val)
            index[node] = len(nodes)
            nodes.append({"op": "input", "index": k})
        elif isinstance(val, torch.SymInt):
            index[node] = len(nodes)
            nodes.append(_size_node(str(val.node.expr), placeholders, names))
        else:
            raise CaptureError(f"input {name} is neither a tensor nor a size")
    outputs: list[int] = []
    output_sizes: list[list[str]] = []
    for node in fw.graph.nodes:
        if node.op == "call_function":
            index[node] = len(nodes)
            nodes.append(_call(node, index))
        elif node.op == "output":
            outs = node.args[0] if isinstance(node.args[0], (list, tuple)) else [node.args[0]]
            if not all(isinstance(o, torch.fx.Node) and o in index for o in outs):
                raise CaptureError("an output that is not a computed tensor")
            outputs = [index[o] for o in outs]
            output_sizes = [_exprs(o.meta["val"].shape) for o in outs
                            if isinstance(o.meta.get("val"), torch.Tensor)]  # fmt: skip
        elif node.op not in ("placeholder",):
            raise CaptureError(f"a {node.op} node ({node.target}): constants are not supported")
    region = Region(
        inputs=tuple(inputs), nodes=tuple(nodes), outputs=tuple(outputs), symbols=symbols,
        title=title,
    )  # fmt: skip
    region.meta["outputs"] = _check_outputs(region)
    region.meta["output_sizes"] = output_sizes
    try:
        region.check()
    except RegionError as exc:
        raise CaptureError(str(exc)) from None
    return region


def _symbols(placeholders: list, names: list[str], tensors: list) -> dict[str, int]:
    """Each symbol's value in the model, read where an input's size or stride is that symbol."""
    values: dict[str, int] = {}
    for node, name in zip(placeholders, names, strict=True):
        val, m = node.meta.get("val"), _DYNAMO_ARG.fullmatch(name)
        if not isinstance(val, torch.Tensor) or m is None:
            continue
        real = tensors[int(m.group(1))]
        for sym, n in (*zip(val.shape, real.shape, strict=True),
                       *zip(val.stride(), real.stride(), strict=True)):  # fmt: skip
            expr = str(sym.node.expr) if isinstance(sym, torch.SymInt) else str(sym)
            if re.fullmatch(r"[a-z]+\d+", expr):
                values.setdefault(expr, int(n))
    return values


def _exprs(seq: Sequence) -> list[str]:
    return [str(s.node.expr) if isinstance(s, torch.SymInt) else str(int(s)) for s in seq]


def _input_spec(t: torch.Tensor, fake: torch.Tensor | None) -> InputSpec:
    sizes = tuple(_exprs(fake.shape)) if fake is not None else tuple(str(n) for n in t.shape)
    strides = tuple(_exprs(fake.stride())) if fake is not None else tuple(map(str, t.stride()))
    lo, hi, std = -1.0, 1.0, 1.0
    if t.numel():
        v = t.detach().double()
        v = v[torch.isfinite(v)] if t.is_floating_point() else v.flatten()
        if v.numel():
            lo, hi = float(v.min()), float(v.max())
            std = float(v.std()) if v.numel() > 1 and t.is_floating_point() else 1.0
    return InputSpec(
        sizes, strides, dtype_name(t.dtype), lo, hi, std if math.isfinite(std) else 1.0
    )


def _size_node(expr: str, placeholders: list, names: list[str]) -> dict:
    """A size placeholder as the size or stride of the input that carries it."""
    for kind in ("size", "stride"):
        for node, name in zip(placeholders, names, strict=True):
            val, m = node.meta.get("val"), _DYNAMO_ARG.fullmatch(name)
            if isinstance(val, torch.Tensor) and m is not None:
                seq = val.shape if kind == "size" else val.stride()
                for d, s in enumerate(seq):
                    if isinstance(s, torch.SymInt) and str(s.node.expr) == expr:
                        return {"op": kind, "input": int(m.group(1)), "dim": d}
    raise CaptureError(f"size {expr} is no input's size or stride")


def _call(node: torch.fx.Node, index: dict) -> dict:
    target = node.target
    if isinstance(target, torch._ops.OpOverload):
        name = str(target)
        if not name.startswith("aten.") or _REFUSED.match(name):
            raise CaptureError(f"{name} cannot be replayed as the model ran it")
    elif target in _SYM_NAMES:
        name = _SYM_NAMES[target]
    else:
        raise CaptureError(f"{getattr(target, '__name__', target)} is not an aten op")
    return {"op": name, "args": [_arg(a, index) for a in node.args],
            "kwargs": {k: _arg(v, index) for k, v in node.kwargs.items()}}  # fmt: skip


def _arg(value: Any, index: dict) -> Any:
    if isinstance(value, torch.fx.Node):
        return {"ref": index[value]}
    if isinstance(value, (list, tuple)):
        return {"list": [_arg(v, index) for v in value]}
    if isinstance(value, bool) or value is None or isinstance(value, (int, str)):
        return value
    if isinstance(value, float):
        return value if math.isfinite(value) else {"float": str(value)}
    if isinstance(value, torch.dtype):
        return {"dtype": dtype_name(value)}
    if isinstance(value, torch.device):
        return {"device": True}
    if isinstance(value, torch.layout):
        return {"layout": str(value).removeprefix("torch.")}
    if isinstance(value, torch.memory_format):
        return {"memory_format": str(value).removeprefix("torch.")}
    raise CaptureError(f"an argument of type {type(value).__name__} cannot be written down")


def _check_outputs(region: Region) -> list[dict]:
    """Replay the description on meta tensors at the model's sizes; returns each output's
    shape and dtype. Several outputs must share a dtype: they go back as one flat tensor."""
    try:
        outs = region.outputs_of(region.meta_inputs())
    except Exception as exc:  # the description does not replay: not a usable region
        raise CaptureError(f"the traced ops do not replay: {type(exc).__name__}: {exc}") from None
    if not all(isinstance(o, torch.Tensor) for o in outs):
        raise CaptureError("an output that is not a tensor")
    if len({o.dtype for o in outs}) != 1:
        raise CaptureError("outputs of several dtypes")
    return [{"shape": list(o.shape), "dtype": dtype_name(o.dtype)} for o in outs]
