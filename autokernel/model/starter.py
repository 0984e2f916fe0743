"""A generic target's starter: Inductor's Triton for the region, as a kernel.py.

Inductor's wrapper (autokernel.model.inductor_code) is read as a syntax tree, never run: its
@triton.jit kernels are kept as written except for the names they import (triton_helpers,
libdevice, tl_math), which become plain-Triton helpers the file defines itself
(autokernel.model.triton_helpers); its `call` function, which allocates the buffers and
launches the kernels, becomes kernel_fn(x0, x1, ...) (autokernel.model.starter_host), each
launch going through a launcher that takes the block sizes and warps from CONFIG. A scalar the
wrapper reads from a 0-dim input with .item() is loaded by the kernel instead (_load_scalars):
kernel_fn reads no element on the host, which the static guard refuses. Anything else
in the wrapper (a library call for part of the region, a kernel shape this module does not
know) is refused with the reason, so a starter either is Inductor's code or does not exist.

Inductor writes two wrappers: one for any size (every dim a symbol) and one for the model's own
sizes and strides, as torch.compile itself specializes; kernel_fn dispatches between them.

CONFIG starts from the block sizes Inductor's heuristics pick for such kernels by default and
SEARCH_SPACE spans the powers of two around them, which is what the built-in tuner walks.
"""

from __future__ import annotations

import ast
import re

import torch

from autokernel import syntax
from autokernel.model import starter_host, starter_launch, triton_helpers
from autokernel.model.inductor_code import InductorCode, kernel_names
from autokernel.model.starter_errors import StarterError
from autokernel.model.starter_launch import Kernel
from autokernel.specs.region import Region

SUPPORTED = ("pointwise", "reduction", "persistent_reduction")


def build(region: Region, code: InductorCode, static: InductorCode | None = None) -> str:
    """The kernel.py text of the region's starter. `code` is Inductor's wrapper for any shape;
    `static`, where given, its wrapper for the model's own sizes and strides, which kernel_fn
    runs at exactly those (torch.compile specializes the same way: with sizes known Inductor
    can keep a whole row on chip, a persistent reduction, where a symbolic size makes it loop
    over the row). A static wrapper this module cannot translate is left out: the any-shape
    kernels then serve every shape."""
    tree = syntax.parse(code.wrapper)
    kernels, helpers = _kernels(tree)
    host = starter_host.host(starter_host.call_function(tree), kernels, code.args)
    at_shape, chosen = None, {}
    if static is not None:
        try:
            s_tree = syntax.parse(_suffixed(static.wrapper))
            s_kernels, s_helpers = _kernels(s_tree)
            s_host = starter_host.host(starter_host.call_function(s_tree), s_kernels, static.args)
        except StarterError:
            pass
        else:
            at_shape = s_host
            kernels = {**kernels, **s_kernels}
            helpers |= s_helpers
            chosen = {n + STATIC_SUFFIX: c for n, c in static.chosen.items()}
    for kernel in kernels.values():
        _load_scalars(kernel, region)
    config, space = starter_launch.tunables(kernels, chosen)
    return _render(region, kernels, helpers, (host, at_shape), config, space)


STATIC_SUFFIX = "_at_shape"


def _suffixed(wrapper: str) -> str:
    """The wrapper with each kernel's name suffixed, so the two wrappers' kernels (Inductor
    names both triton_poi_fused_..._0) live side by side in one file."""
    for name in kernel_names(wrapper):
        wrapper = re.sub(rf"\b{name}\b", name + STATIC_SUFFIX, wrapper)
    return wrapper


# ---- the kernels ------------------------------------------------------------------------------

# Triton's names for scalar types, as Inductor's signatures write them.
_TL_TYPES = {"fp16": "float16", "bf16": "bfloat16", "fp32": "float32", "fp64": "float64",
             "i1": "int1", "i8": "int8", "i16": "int16", "i32": "int32", "i64": "int64",
             "u8": "uint8", "u16": "uint16", "u32": "uint32", "u64": "uint64"}  # fmt: skip
SCALAR_SUFFIX = "_scalar_ptr"


def _load_scalars(kernel: Kernel, region: Region) -> None:
    """Each scalar param the wrapper unwrapped from a 0-dim input with .item()
    (Kernel.scalars) becomes a pointer to that input, loaded first thing in the kernel and cast
    to the type Inductor's signature gave the scalar: the value the kernel computed with, read
    on the device, so kernel_fn reads nothing on the host (which the static guard refuses)."""
    if not kernel.scalars:
        return
    fn = syntax.parse(kernel.source).body[0]
    assert isinstance(fn, ast.FunctionDef)
    loads = []
    for a in fn.args.args:
        if a.arg in kernel.scalars:
            dtype = _scalar_type(kernel.signature.get(a.arg), region, kernel.scalars[a.arg])
            loads.append(f"{a.arg} = tl.load({a.arg}{SCALAR_SUFFIX}).to(tl.{dtype})")
            a.arg += SCALAR_SUFFIX
    fn.body = [*syntax.parse("\n".join(loads)).body, *fn.body]
    kernel.source = ast.unparse(fn)


def _scalar_type(signed: str | None, region: Region, index: int) -> str:
    """Inductor's type for the scalar; without a signature, that of the Python number .item()
    gives: a float (float32 unless the tensor is float64), an int, a bool."""
    if signed in _TL_TYPES:
        return _TL_TYPES[signed]
    dtype = region.inputs[index].torch_dtype
    if dtype == torch.bool:
        return "int1"
    if dtype.is_floating_point:
        return "float64" if dtype == torch.float64 else "float32"
    return "int64"


def _kernels(tree: ast.Module) -> tuple[dict[str, Kernel], set[str]]:
    kernels: dict[str, Kernel] = {}
    helpers: set[str] = set()
    for stmt in tree.body:
        if not (isinstance(stmt, ast.Assign) and isinstance(stmt.value, ast.Call)):
            continue
        func = stmt.value.func
        compiled = isinstance(func, ast.Attribute) and func.attr == "triton"
        if not (compiled and isinstance(func.value, ast.Name)):
            continue
        if func.value.id != "async_compile":
            continue
        name, src = (a.value for a in stmt.value.args[:2])  # type: ignore[attr-defined]
        kernel = _kernel(str(name), str(src), helpers)
        kernels[kernel.name] = kernel
    if not kernels:
        raise StarterError("Inductor generated no Triton kernel for the region")
    return kernels, helpers


def _kernel(name: str, src: str, helpers: set[str]) -> Kernel:
    tree = syntax.parse(src)
    fn = next((s for s in tree.body if isinstance(s, ast.FunctionDef) and s.name == name), None)
    if fn is None:
        raise StarterError(f"{name}: no @triton.jit function of that name in its source")
    kind, meta = "", {}
    for dec in fn.decorator_list:
        if isinstance(dec, ast.Call) and isinstance(dec.func, ast.Attribute):
            if isinstance(dec.func.value, ast.Name) and dec.func.value.id == "triton_heuristics":
                kind = dec.func.attr
                meta = {k.arg: k.value for k in dec.keywords if k.arg}
    if kind not in SUPPORTED:
        raise StarterError(f"{name}: a {kind or 'undecorated'} kernel (supported: "
                           f"{', '.join(SUPPORTED)})")  # fmt: skip
    constexprs = {a.arg for a in fn.args.args if _is_constexpr(a.annotation)}
    params = [a.arg for a in fn.args.args if a.arg not in constexprs]
    for a in fn.args.args:
        a.annotation = _constexpr_annotation() if a.arg in constexprs else None
    fn.decorator_list = [ast.Attribute(ast.Name("triton", ast.Load()), "jit", ast.Load())]
    fn.body = [_Rewriter(name, helpers).visit(s) for s in fn.body]
    kernel = Kernel(name, kind, ast.unparse(fn), params, constexprs)
    kernel.local = _local_functions(tree, fn, helpers)
    kernel.size_hints = _literal(meta.get("size_hints")) or {}
    inductor_meta = _dict_items(meta.get("inductor_meta"))
    signature = _dict_items(meta.get("triton_meta")).get("signature")
    kernel.signature = {str(k): str(v) for k, v in (signature or {}).items()}
    hint = meta.get("reduction_hint")  # a keyword of the decorator; in inductor_meta before
    hint = ast.unparse(hint) if hint is not None else inductor_meta.get("reduction_hint", "")
    kernel.hint = str(hint).rsplit(".", 1)[-1]
    _axes(kernel, fn, constexprs)
    return kernel


def _local_functions(tree: ast.Module, fn: ast.FunctionDef, helpers: set[str]) -> dict[str, str]:
    """The @triton.jit functions the kernel's source defines beside it and the kernel calls,
    directly or through one another (a scan's combine function, _triton_helper_fn_add0),
    rewritten like the kernel: without them the starter names a function it never defines."""
    defined = {s.name: s for s in tree.body if isinstance(s, ast.FunctionDef) and s is not fn}
    found: dict[str, str] = {}
    todo = [fn]
    while todo:
        for node in ast.walk(todo.pop()):
            if isinstance(node, ast.Name) and node.id in defined and node.id not in found:
                local = defined[node.id]
                local.decorator_list = [
                    ast.Attribute(ast.Name("triton", ast.Load()), "jit", ast.Load())
                ]
                local.body = [_Rewriter(local.name, helpers).visit(s) for s in local.body]
                found[local.name] = ast.unparse(local)
                todo.append(local)
    return found


def _is_constexpr(node: ast.AST | None) -> bool:
    return isinstance(node, ast.Attribute) and node.attr == "constexpr"


def _constexpr_annotation() -> ast.Attribute:
    return ast.Attribute(ast.Name("tl", ast.Load()), "constexpr", ast.Load())


def _literal(node: ast.AST | None) -> object:
    try:
        return ast.literal_eval(node) if node is not None else None
    except ValueError:
        return None


def _dict_items(node: ast.AST | None) -> dict:
    """The literal entries of a dict display (non-literal values such as set() left out)."""
    if not isinstance(node, ast.Dict):
        return {}
    out = {}
    for k, v in zip(node.keys, node.values, strict=True):
        key = _literal(k)
        value = _literal(v)
        if isinstance(key, str) and value is not None:
            out[key] = value
        elif isinstance(key, str) and isinstance(v, ast.Attribute):
            out[key] = ast.unparse(v)  # ReductionHint.INNER
    return out


def _axes(kernel: Kernel, fn: ast.FunctionDef, constexprs: set[str]) -> None:
    """Which program_id axis each block walks: `xoffset = tl.program_id(0) * XBLOCK`."""
    for stmt in ast.walk(fn):
        if isinstance(stmt, ast.AnnAssign) and isinstance(stmt.target, ast.Name):
            value = _literal(stmt.value)
            if isinstance(value, int):
                kernel.fixed[stmt.target.id] = value
        if not (isinstance(stmt, ast.Assign) and len(stmt.targets) == 1):
            continue
        target = stmt.targets[0]
        if not (isinstance(target, ast.Name) and target.id in ("xoffset", "yoffset", "zoffset")):
            continue
        v = stmt.value
        ok = (isinstance(v, ast.BinOp) and isinstance(v.op, ast.Mult) and _program_id(v.left)
              is not None and isinstance(v.right, ast.Name))  # fmt: skip
        if not ok:
            raise StarterError(f"{kernel.name}: {target.id} = {ast.unparse(v)} is not a plain "
                               "program_id(axis) * BLOCK")  # fmt: skip
        kernel.blocks[v.right.id] = _program_id(v.left)  # type: ignore[union-attr,assignment]
    kernel.r_blocks = sorted(c for c in constexprs if c.startswith("R") and c.endswith("BLOCK"))
    unknown = constexprs - set(kernel.blocks) - set(kernel.r_blocks)
    if unknown:
        raise StarterError(f"{kernel.name}: constexpr {', '.join(sorted(unknown))} unknown here")


def _program_id(node: ast.AST) -> int | None:
    if (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
            and node.func.attr == "program_id" and len(node.args) == 1):  # fmt: skip
        axis = _literal(node.args[0])
        return axis if isinstance(axis, int) else None
    return None


class _Rewriter(ast.NodeTransformer):
    """Inductor's imported names -> plain Triton: triton_helpers.X -> _X (defined in the file),
    libdevice.X -> tl.* or a helper, tl_math.X -> tl.math.X."""

    def __init__(self, kernel: str, helpers: set[str]) -> None:
        self.kernel, self.helpers = kernel, helpers

    def visit_Attribute(self, node: ast.Attribute) -> ast.AST:
        if not isinstance(node.value, ast.Name):
            self.generic_visit(node)
            return node
        root, attr = node.value.id, node.attr
        if root == "triton_helpers":
            if not triton_helpers.has(f"_{attr}"):
                raise StarterError(
                    f"{self.kernel}: triton_helpers.{attr} has no plain-Triton form here"
                )
            self.helpers.add(f"_{attr}")
            return ast.Name(f"_{attr}", ast.Load())
        if root == "libdevice":
            replacement = triton_helpers.LIBDEVICE.get(attr)
            if replacement is None:
                raise StarterError(f"{self.kernel}: libdevice.{attr} has no plain-Triton form")
            if replacement.startswith("_"):
                self.helpers.add(replacement)
            return syntax.parse(replacement, mode="eval").body
        if root == "tl_math":
            return ast.Attribute(ast.Attribute(ast.Name("tl", ast.Load()), "math", ast.Load()),
                                 attr, ast.Load())  # fmt: skip
        self.generic_visit(node)
        return node

    def visit_Name(self, node: ast.Name) -> ast.AST:
        if node.id in ("triton_helpers", "libdevice", "tl_math", "triton_heuristics"):
            raise StarterError(f"{self.kernel}: {node.id} used other than as a module")
        return node


# ---- the file -----------------------------------------------------------------------------------


def _render(region, kernels, helpers, host, config, space) -> str:
    ops = sorted(
        {str(n["op"]).split(".")[1] for n in region.nodes if str(n["op"]).startswith("aten.")}
    )
    inputs = ", ".join(
        f"x{k}: {i.dtype}[{', '.join(i.sizes)}]" for k, i in enumerate(region.inputs)
    )
    import triton  # here, not at import: TRITON_INTERPRET must be set before triton loads

    flat = " (its outputs flattened into one tensor)" if len(region.outputs) > 1 else ""
    versions = f"Inductor, torch {torch.__version__}, Triton {triton.__version__}"
    doc = (
        f'"""Starter for {region.title or "a region of the model"}: the Triton torch.compile '
        f"({versions}) generates for it.\n\n"
        f"The region's aten ops: {', '.join(ops)}. kernel_fn({inputs})\n"
        f"returns what the model computed{flat}.\n"
        "Written by autokernel.model.starter from Inductor's wrapper: its kernels as generated,\n"
        "with Inductor's helper imports replaced by the plain-Triton functions below; CONFIG\n"
        "holds each kernel's block sizes and warps (key suffix: the kernel's launch order).\n"
        + (
            f"At the model's own sizes and strides (AT_SHAPE) kernel_fn runs the kernels Inductor\n"
            f"compiled for exactly those (names ending {STATIC_SUFFIX}), elsewhere the ones it\n"
            "compiled for any size.\n"
            if host[1] is not None
            else ""
        )
        + '"""'
    )
    parts = [
        doc,
        "import torch\nimport triton\nimport triton.language as tl",
        'KERNEL_TYPE = "generic"\nBACKEND = "triton"',
        "# Tunables read by the launchers; the built-in tuner rewrites this dict literal.\n"
        f"CONFIG = {_dict_text(config)}\n"
        "# Allowed values per CONFIG key: every combination computes the same result.\n"
        f"SEARCH_SPACE = {_dict_text(space)}",
        *triton_helpers.sources(helpers),
        *_locals(kernels),
        *(k.source for k in kernels.values()),
        *(starter_launch.launcher(i, k) for i, k in enumerate(kernels.values())),
    ]
    parts.extend(_entry(region, *host))
    return "\n\n\n".join(parts) + "\n"


def _locals(kernels: dict[str, Kernel]) -> list[str]:
    """The kernels' own helper functions, each once: the any-shape and the at-shape wrapper
    define the same one under the same name."""
    out: dict[str, str] = {}
    for k in kernels.values():
        for name, src in k.local.items():
            if out.setdefault(name, src) != src:
                raise StarterError(f"{k.name}: two different helper functions named {name}")
    return list(out.values())


def _entry(region: Region, host: list[str], at_shape: list[str] | None) -> list[str]:
    """kernel_fn: the any-shape host code, or, where there is one, a dispatch on the inputs'
    sizes and strides to the host code compiled for the model's own."""
    args = ", ".join(f"x{k}" for k in range(len(region.inputs)))

    def fn(name: str, lines: list[str]) -> str:
        return f"def {name}({args}):\n" + "\n".join(f"    {line}" for line in lines)

    if at_shape is None:
        return [fn("kernel_fn", host)]
    shapes = tuple(
        tuple(tuple(int(v) for v in seq) for seq in region.shape_of(k, region.symbols))
        for k in range(len(region.inputs))
    )
    probe = ", ".join(f"(tuple(x{k}.shape), x{k}.stride())" for k in range(len(region.inputs)))
    dispatch = [
        f"if ({probe},) == AT_SHAPE:",
        f"    return _at_shape({args})",
        f"return _any_shape({args})",
    ]
    return [
        "# Each input's (sizes, strides) in the model: Inductor's code for exactly these runs "
        f"there.\nAT_SHAPE = {shapes!r}",
        fn("_at_shape", at_shape),
        fn("_any_shape", host),
        fn("kernel_fn", dispatch),
    ]


def _dict_text(d: dict) -> str:
    inner = "".join(f'\n    "{k}": {v!r},' for k, v in d.items())
    return "{" + inner + "\n}"
