"""kernel_fn from Inductor's call(): the host half of a generic starter.

Inductor's wrapper allocates each buffer and launches each kernel in a `call(args)` function;
that body becomes kernel_fn's, statement by statement: arguments bound to kernel_fn's tensors
and their sizes (ArgSource), `empty_strided_*` allocations to torch.empty_strided on the
inputs' device, `reinterpret_tensor` to .as_strided, size arithmetic kept, each `<kernel>.run`
to the file's launcher, device guards, stream lookups, asserts and `del` dropped. Any other
statement is a part of the region Inductor did not write as Triton (a library call): refused.

A 0-dim CPU tensor input (a scalar the model passes as a tensor) is one Inductor unwraps at the
launch, `<kernel>.run(arg1_1.item(), ...)`. kernel_fn may not read an element on the host (the
static guard refuses `.item` in any kernel.py: it is how a candidate would sync or compute in
Python), so the launch passes the tensor itself and the kernel loads the value
(Kernel.scalars, written into the kernel by autokernel.model.starter).
"""

from __future__ import annotations

import ast

from autokernel.model.inductor_code import ArgSource
from autokernel.model.starter_errors import StarterError

ALLOCATORS = ("empty_strided_cuda", "empty_strided_cpu", "empty_strided_xpu", "empty_strided")
DROPPED_CALLS = ("assert_size_stride", "assert_alignment", "get_raw_stream", "check_type")


def call_function(tree: ast.Module) -> ast.FunctionDef:
    for stmt in tree.body:
        if isinstance(stmt, ast.FunctionDef) and stmt.name == "call":
            return stmt
        if isinstance(stmt, ast.ClassDef):
            for item in stmt.body:
                if isinstance(item, ast.FunctionDef) and item.name == "call":
                    return item
    raise StarterError("Inductor's wrapper has no call() function")


def _source(arg: ArgSource) -> str:
    if arg.kind == "tensor":
        return f"x{arg.input}"
    if arg.kind == "size":
        return f"x{arg.input}.shape[{arg.dim}]"
    return f"x{arg.input}.stride({arg.dim})"


def host(fn: ast.FunctionDef, kernels: dict, args: tuple[ArgSource, ...]) -> list[str]:
    """kernel_fn's body: the wrapper's call() with its arguments bound to x0, x1, ... The graph
    Inductor compiled returns one tensor (a region's several outputs are concatenated in it,
    so Inductor writes them straight into one buffer)."""
    lines: list[str] = []
    outputs: list[str] = []
    bound: dict[str, int] = {}  # the wrapper's names for input tensors -> their index

    def walk(stmts: list[ast.stmt]) -> None:
        for stmt in stmts:
            _statement(stmt, kernels, args, lines, outputs, walk, bound)

    walk(fn.body)
    if len(outputs) != 1:
        raise StarterError(f"Inductor's call() returns {len(outputs)} tensors, not one")
    lines.append(f"return {outputs[0]}")
    return lines


def _statement(stmt, kernels, args, lines, outputs, walk, bound) -> None:
    if isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Constant):
        return  # a docstring
    if isinstance(stmt, ast.Delete):
        return
    if isinstance(stmt, ast.With):
        walk(stmt.body)  # torch.cuda._DeviceGuard(0): the tensors' device is used instead
        return
    if isinstance(stmt, ast.Return):
        value = stmt.value
        elts = value.elts if isinstance(value, ast.Tuple) else [value]
        if not all(isinstance(e, ast.Name) for e in elts):
            raise StarterError(f"call() returns {ast.unparse(value)}, not buffers")
        outputs.extend(e.id for e in elts)  # type: ignore[union-attr]
        return
    if isinstance(stmt, ast.Assign) and len(stmt.targets) == 1:
        target, value = stmt.targets[0], stmt.value
        if isinstance(value, ast.Name) and value.id == "args" and isinstance(target, ast.Tuple):
            names = [e.id for e in target.elts]  # type: ignore[attr-defined]
            if len(names) != len(args):
                raise StarterError(f"call() takes {len(names)} arguments, the graph {len(args)}")
            lines.extend(f"{n} = {_source(a)}" for n, a in zip(names, args, strict=True))
            bound.update(
                (n, a.input) for n, a in zip(names, args, strict=True) if a.kind == "tensor"
            )
            return
        if isinstance(value, ast.Call) and isinstance(value.func, ast.Name):
            fname = value.func.id
            if fname in DROPPED_CALLS:
                return
            if fname in ALLOCATORS:
                size, stride, dtype = (ast.unparse(a) for a in value.args[:3])
                lines.append(f"{ast.unparse(target)} = torch.empty_strided({size}, {stride}, "
                             f"dtype={dtype}, device=x0.device)")  # fmt: skip
                return
            if fname == "reinterpret_tensor":
                buf, size, stride, offset = (ast.unparse(a) for a in value.args[:4])
                lines.append(f"{ast.unparse(target)} = {buf}.as_strided({size}, {stride}, "
                             f"{offset})")  # fmt: skip
                return
        if _is_arithmetic(value):
            lines.append(ast.unparse(stmt))
            return
    if isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Call):
        call = stmt.value
        func = call.func
        if isinstance(func, ast.Name) and func.id in DROPPED_CALLS:
            return
        if isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name):
            if func.value.id == "args" and func.attr == "clear":
                return
            if func.attr == "run" and func.value.id in kernels:
                params = kernels[func.value.id].params
                if len(call.args) != len(params) or any(k.arg not in ("stream", "grid")
                                                        for k in call.keywords):  # fmt: skip
                    raise StarterError(f"{func.value.id}.run(...) does not match its kernel")
                kernel = kernels[func.value.id]
                pairs = zip(call.args, params, strict=True)
                values = [_argument(a, p, kernel, bound) for a, p in pairs]
                lines.append(f"_launch_{func.value.id}({', '.join(values)})")
                return
        if isinstance(func, ast.Attribute) and func.attr == "set_device":
            return
    raise StarterError(f"Inductor's call() runs `{ast.unparse(stmt)[:120]}`, which a kernel.py "
                       "cannot: part of the region is not a Triton kernel")  # fmt: skip


def _argument(arg: ast.expr, param: str, kernel, bound: dict[str, int]) -> str:
    """A launch argument as kernel_fn passes it: an input Inductor unwrapped with .item()
    goes as the tensor, and the kernel loads it."""
    item = (isinstance(arg, ast.Call) and isinstance(arg.func, ast.Attribute)
            and arg.func.attr == "item" and not arg.args and not arg.keywords)  # fmt: skip
    if not item:
        return ast.unparse(arg)
    receiver = arg.func.value  # type: ignore[attr-defined]
    if not (isinstance(receiver, ast.Name) and receiver.id in bound):
        raise StarterError(f"{kernel.name}: launched with {ast.unparse(arg)}, a value read on "
                           "the host from no input")  # fmt: skip
    kernel.scalars[param] = bound[receiver.id]
    return receiver.id


def _is_arithmetic(node: ast.AST) -> bool:
    """Sizes and their products: names, integers, + - * // % and min/max, a tensor argument's
    .size() / .stride() and an element of one (arg2_1_size[1])."""
    metadata = set()
    for n in ast.walk(node):
        if isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute):
            if n.func.attr in ("size", "stride") and isinstance(n.func.value, ast.Name):
                metadata.add(id(n.func))
                continue
            return False
    for n in ast.walk(node):
        if isinstance(n, ast.Call):
            if isinstance(n.func, ast.Attribute) and id(n.func) in metadata:
                continue
            if not (isinstance(n.func, ast.Name) and n.func.id in ("min", "max")):
                return False
        elif isinstance(n, ast.Attribute):
            if id(n) not in metadata:
                return False
        elif isinstance(n, ast.Subscript):
            if not (isinstance(n.value, ast.Name) and isinstance(n.slice, ast.Constant)):
                return False
        elif isinstance(n, ast.Lambda | ast.Await):
            return False
        elif isinstance(n, ast.Constant) and not isinstance(n.value, int | float):
            return False
    return True
