"""A region of a model as data: the aten ops it ran, their arguments and symbolic shapes.

A generic target (any op or fused region outside the nine types) is described by the aten graph
torch.compile traced for it (autokernel.model.capture): each node an aten op, a size of an input
or Python arithmetic on sizes, with its arguments written out (node references, scalars, dtypes,
lists). The judge rebuilds the reference from this description alone, never from candidate
code, and the same description gives the inputs of every check, at the model's sizes and at
perturbed ones: input sizes and strides are expressions over named symbols (s0, s1, ...), and a
size is a value for each symbol.

Only aten ops and a fixed set of integer operations can be named, so a description cannot run
anything else however it was written.
"""

from __future__ import annotations

import hashlib
import json
import math
import operator
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import torch

from autokernel.specs.base import dtype_name
from autokernel.specs.size_expr import RegionError, eval_expr

# Integer and comparison operations on sizes that traced graphs use besides aten ops.
SYM_OPS: dict[str, Callable] = {
    "operator.add": operator.add, "operator.sub": operator.sub, "operator.mul": operator.mul,
    "operator.floordiv": operator.floordiv, "operator.truediv": operator.truediv,
    "operator.mod": operator.mod, "operator.neg": operator.neg, "operator.pow": operator.pow,
    "operator.eq": operator.eq, "operator.ne": operator.ne, "operator.lt": operator.lt,
    "operator.le": operator.le, "operator.gt": operator.gt, "operator.ge": operator.ge,
    "torch.sym_float": float, "torch.sym_int": int, "torch.sym_max": max, "torch.sym_min": min,
    "math.ceil": math.ceil, "math.floor": math.floor,
    "operator.getitem": operator.getitem,  # one output of an op that returns several
}  # fmt: skip
_OP_NAME = re.compile(r"aten\.[A-Za-z0-9_]+\.[A-Za-z0-9_]+")
_FLOATS = {torch.float16, torch.bfloat16, torch.float32}
_OTHER = (torch.float64, torch.int64, torch.int32, torch.int16, torch.int8, torch.uint8, torch.bool)
_DTYPES = {dtype_name(d): d for d in (*_FLOATS, *_OTHER)}


@dataclass(frozen=True)
class InputSpec:
    """One tensor input: sizes and strides over the symbols, dtype, and the value range seen
    in the model (integer inputs are drawn inside it; float inputs keep their sign)."""

    sizes: tuple[str, ...]
    strides: tuple[str, ...]
    dtype: str
    lo: float = -1.0
    hi: float = 1.0
    std: float = 1.0

    @property
    def torch_dtype(self) -> torch.dtype:
        return _DTYPES[self.dtype]


@dataclass(frozen=True)
class Region:
    inputs: tuple[InputSpec, ...]
    nodes: tuple[dict, ...]  # {"op": ..., "args": [...], "kwargs": {...}}, in execution order
    outputs: tuple[int, ...]  # node indices
    symbols: dict[str, int]  # each symbol's value in the model
    title: str = ""  # what the model called: 'torch.nn.functional.gelu', 'NewGELUActivation'
    meta: dict[str, Any] = field(default_factory=dict)  # output shapes/dtypes as traced

    # -- serialization -------------------------------------------------------------------------

    def to_dict(self) -> dict:
        return {
            "title": self.title,
            "symbols": dict(self.symbols),
            "inputs": [
                vars(i) | {"sizes": list(i.sizes), "strides": list(i.strides)} for i in self.inputs
            ],
            "nodes": [dict(n) for n in self.nodes],
            "outputs": list(self.outputs),
            "meta": dict(self.meta),
        }

    @classmethod
    def from_dict(cls, data: Mapping) -> Region:
        """Checked: every op name known, every reference backwards, sizes evaluable."""
        try:
            inputs = tuple(
                InputSpec(
                    tuple(map(str, i["sizes"])),
                    tuple(map(str, i["strides"])),
                    str(i["dtype"]),
                    float(i.get("lo", -1.0)),
                    float(i.get("hi", 1.0)),
                    float(i.get("std", 1.0)),
                )
                for i in data["inputs"]
            )
            region = cls(
                inputs=inputs,
                nodes=tuple(dict(n) for n in data["nodes"]),
                outputs=tuple(int(o) for o in data["outputs"]),
                symbols={str(k): int(v) for k, v in data["symbols"].items()},
                title=str(data.get("title", "")),
                meta=dict(data.get("meta") or {}),
            )
        except (KeyError, TypeError, ValueError, AttributeError) as exc:
            raise RegionError(f"not a region description: {type(exc).__name__}: {exc}") from None
        region.check()
        return region

    def digest(self) -> str:
        """Names the region in caches (baselines): two regions with the same sizes differ."""
        body = {k: v for k, v in self.to_dict().items() if k not in ("symbols", "title", "meta")}
        text = json.dumps(body, sort_keys=True, default=str)
        return hashlib.sha256(text.encode()).hexdigest()[:16]

    def check(self) -> None:
        for spec in self.inputs:
            if spec.dtype not in _DTYPES:
                raise RegionError(f"input dtype {spec.dtype!r} is not supported")
            for e in (*spec.sizes, *spec.strides):
                eval_expr(e, self.symbols)
        for i, node in enumerate(self.nodes):
            op = node.get("op")
            if op == "input":
                if not 0 <= int(node["index"]) < len(self.inputs):
                    raise RegionError(f"node {i}: no input {node['index']}")
            elif op in ("size", "stride"):
                if not 0 <= int(node["input"]) < len(self.inputs):
                    raise RegionError(f"node {i}: no input {node['input']}")
            elif op in SYM_OPS:
                pass
            elif not (isinstance(op, str) and _OP_NAME.fullmatch(op) and _aten(op) is not None):
                raise RegionError(f"node {i}: {op!r} is not an aten op or a size operation")
            _refs_before(node.get("args", []), i)
            for v in node.get("kwargs", {}).values():  # the kwargs dict is no encoded value
                _refs_before(v, i)
        if not self.outputs or any(not 0 <= o < len(self.nodes) for o in self.outputs):
            raise RegionError("outputs name no node")

    def text(self) -> str:
        """The region as a reader (an LLM agent) sees it: each aten op on named values, x0,
        x1, ... being kernel_fn's arguments in order."""
        lines = [f"# {self.title or 'a region of the model'}: aten ops as the model ran them"]
        for k, spec in enumerate(self.inputs):
            lines.append(f"# x{k}: {spec.dtype}[{', '.join(spec.sizes)}] strides "
                         f"[{', '.join(spec.strides)}]")  # fmt: skip
        lines.append(f"# symbols in the model: {self.symbols}")
        names: list[str] = []
        for i, node in enumerate(self.nodes):
            op = node["op"]
            if op == "input":
                names.append(f"x{node['index']}")
                continue
            if op in ("size", "stride"):
                names.append(f"x{node['input']}.{op}({node['dim']})")
                continue
            args = [_show(a, names) for a in node.get("args", [])]
            args += [f"{k}={_show(v, names)}" for k, v in node.get("kwargs", {}).items()]
            names.append(f"v{i}")
            lines.append(f"v{i} = {op}({', '.join(args)})")
        outs = [names[o] for o in self.outputs]
        flat = f"cat([o.reshape(-1) for o in ({', '.join(outs)})])"
        lines.append("return " + (outs[0] if len(outs) == 1 else flat))
        return "\n".join(lines)

    # -- the dtype the region computes in ---------------------------------------------------------

    @property
    def dtype(self) -> torch.dtype:
        """The main floating dtype: that of the first floating input (else float32)."""
        floats = [i.torch_dtype for i in self.inputs if i.torch_dtype.is_floating_point]
        return floats[0] if floats else torch.float32

    # -- shapes --------------------------------------------------------------------------------

    def shape_of(self, index: int, values: Mapping[str, int]) -> tuple[list[int], list[int]]:
        spec = self.inputs[index]
        return ([eval_expr(e, values) for e in spec.sizes],
                [eval_expr(e, values) for e in spec.strides])  # fmt: skip

    def bind(self, tensors: Sequence[torch.Tensor]) -> dict[str, int] | str:
        """The symbols' values for these tensors, or why they do not fit the description (a
        size-1 dim, dtype, rank or stride the traced code did not assume)."""
        if len(tensors) != len(self.inputs):
            return f"{len(tensors)} tensors for a region of {len(self.inputs)} inputs"
        values: dict[str, int] = {}
        for t, spec in zip(tensors, self.inputs, strict=True):
            if not isinstance(t, torch.Tensor) or t.dim() != len(spec.sizes):
                return "not the traced rank"
            if t.dtype != spec.torch_dtype:
                return f"dtype {dtype_name(t.dtype)} (traced for {spec.dtype})"
            for e, n in (*zip(spec.sizes, t.shape, strict=True),
                         *zip(spec.strides, t.stride(), strict=True)):  # fmt: skip
                if e in self.symbols:
                    values.setdefault(e, int(n))
        if set(values) != set(self.symbols):
            return "symbols not all bound by input sizes"
        for k, (t, spec) in enumerate(zip(tensors, self.inputs, strict=True)):
            sizes, strides = self.shape_of(k, values)
            if list(t.shape) != sizes:
                return f"input {k}: sizes {list(t.shape)} do not fit {list(spec.sizes)}"
            if any(st != s for st, s, n in zip(t.stride(), strides, sizes, strict=True) if n > 1):
                return f"input {k}: strides {list(t.stride())} not the traced layout"
        return values

    # -- running it ------------------------------------------------------------------------------

    def replay(self, tensors: Sequence[torch.Tensor], upcast: bool = False) -> torch.Tensor:
        """The region's output on `tensors` (one tensor: several outputs are flattened and
        concatenated). upcast: compute as the reference does, every float dtype the model named
        replaced by float64 (the inputs are float64 already)."""
        outs = self.outputs_of(tensors, upcast)
        if len(outs) == 1:
            return outs[0]
        return torch.cat([o.reshape(-1) for o in outs])

    def output_shapes(self, values: Mapping[str, int]) -> list[list[int]]:
        """Each output's shape at `values`, from the traced output sizes."""
        sizes = self.meta.get("output_sizes") or [o["shape"] for o in self.meta["outputs"]]
        return [[eval_expr(str(e), values) for e in shape] for shape in sizes]

    def outputs_of(self, tensors: Sequence[torch.Tensor], upcast: bool = False) -> list:
        """Each output of the region on `tensors`, as the model returned them."""
        env: list[Any] = []
        for node in self.nodes:
            env.append(_run(node, env, tensors, upcast))
        return [env[i] for i in self.outputs]

    def graph_module(self, device: torch.device) -> torch.fx.GraphModule:
        """The region as an FX graph over x0, x1, ...: what torch.compile traces cleanly (the
        compile baseline, the starter's code generation) where the replay's Python loop over
        node records would be traced op by op with its dict lookups."""
        graph = torch.fx.Graph()
        env: list[Any] = []
        xs = [graph.placeholder(f"x{k}") for k in range(len(self.inputs))]
        for node in self.nodes:
            op = node["op"]
            if op == "input":
                env.append(xs[int(node["index"])])
                continue
            if op in ("size", "stride"):
                fn = torch.ops.aten.sym_size.int if op == "size" else torch.ops.aten.sym_stride.int
                env.append(graph.call_function(fn, (xs[int(node["input"])], int(node["dim"]))))
                continue
            args = _value(node.get("args", []), env, False, device)
            kwargs = {k: _value(v, env, False, device) for k, v in node.get("kwargs", {}).items()}
            target = SYM_OPS.get(op) or _aten(op)
            env.append(graph.call_function(target, tuple(args), kwargs))
        outs = [env[i] for i in self.outputs]
        if len(outs) == 1:
            graph.output(outs[0])
        else:
            flat = [graph.call_function(torch.ops.aten.reshape.default, (o, [-1])) for o in outs]
            graph.output(graph.call_function(torch.ops.aten.cat.default, (flat,)))
        return torch.fx.GraphModule(torch.nn.Module(), graph)

    def meta_inputs(self, values: Mapping[str, int] | None = None) -> list[torch.Tensor]:
        """Inputs on the meta device at `values` (the model's sizes by default): shapes only."""
        values = self.symbols if values is None else values
        out = []
        for k, spec in enumerate(self.inputs):
            sizes, strides = self.shape_of(k, values)
            out.append(torch.empty_strided(sizes, strides, dtype=spec.torch_dtype, device="meta"))
        return out


def _show(v: Any, names: list[str]) -> str:
    if isinstance(v, dict):
        if "ref" in v:
            return names[int(v["ref"])]
        if "list" in v:
            return "[" + ", ".join(_show(x, names) for x in v["list"]) + "]"
        if "dtype" in v:
            return f"torch.{v['dtype']}"
        if "float" in v:
            return f"float({v['float']!r})"
        return next(iter(v))
    return repr(v)


def _refs_before(value: Any, i: int) -> None:
    if isinstance(value, dict):
        if "ref" in value and not 0 <= int(value["ref"]) < i:
            raise RegionError(f"node {i} refers to node {value['ref']}, not an earlier one")
        for v in value.values():
            _refs_before(v, i)
    elif isinstance(value, list):
        for v in value:
            _refs_before(v, i)


def _aten(name: str) -> torch._ops.OpOverload | None:
    _, op, overload = name.split(".")
    packet = getattr(torch.ops.aten, op, None)
    target = getattr(packet, overload, None) if packet is not None else None
    return target if isinstance(target, torch._ops.OpOverload) else None


def _value(v: Any, env: list, upcast: bool, device: torch.device | None) -> Any:
    if isinstance(v, list):
        return [_value(x, env, upcast, device) for x in v]
    if not isinstance(v, dict):
        return v
    if "ref" in v:
        return env[int(v["ref"])]
    if "list" in v:
        return [_value(x, env, upcast, device) for x in v["list"]]
    if "dtype" in v:
        dtype = _DTYPES.get(v["dtype"])
        if dtype is None:
            raise RegionError(f"dtype {v['dtype']!r} is not supported")
        return torch.float64 if upcast and dtype in _FLOATS else dtype
    if "device" in v:
        return device
    if "layout" in v:
        return torch.strided
    if "memory_format" in v:
        return getattr(torch, str(v["memory_format"]), torch.preserve_format)
    if "float" in v:  # inf and nan, which YAML and JSON spell differently
        return float(v["float"])
    return {k: _value(x, env, upcast, device) for k, x in v.items()}


def _run(node: dict, env: list, tensors: Sequence[torch.Tensor], upcast: bool) -> Any:
    op = node["op"]
    if op == "input":
        return tensors[int(node["index"])]
    if op == "size":
        return int(tensors[int(node["input"])].shape[int(node["dim"])])
    if op == "stride":
        return int(tensors[int(node["input"])].stride(int(node["dim"])))
    device = tensors[0].device if tensors else None
    args = _value(node.get("args", []), env, upcast, device)
    kwargs = {k: _value(v, env, upcast, device) for k, v in node.get("kwargs", {}).items()}
    if op in SYM_OPS:
        return SYM_OPS[op](*args)
    target = _aten(op)
    if target is None:
        raise RegionError(f"{op!r} is not an aten op")
    if upcast and "half_to_float" in {a.name for a in target._schema.arguments}:
        args = [*args[:2], False, *args[3:]] if len(args) > 2 else args  # float64 is not Half
    return target(*args, **kwargs)
