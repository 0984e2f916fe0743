"""Guards that keep a candidate from faking speed or correctness.

Two layers. The static check reads kernel.py's syntax tree in the parent (nothing is
imported): only allow-listed modules, torch only for allocation and metadata, no I/O, no
reflection. The runtime monitor records every aten op that kernel_fn issues while the harness
calls it, so `x @ w` or a torch fallback hidden behind operators is caught too.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass

from torch.utils._python_dispatch import TorchDispatchMode

ALLOWED_IMPORTS = frozenset(
    {"torch", "triton", "math", "functools", "typing", "dataclasses", "itertools", "enum",
     "operator", "__future__"}
)  # fmt: skip

# torch.<path> that kernel.py may touch: allocation, dtypes, device queries, and building a
# CUDA extension for BACKEND = "cuda". Everything else in torch computes and is off limits.
ALLOWED_TORCH = frozenset(
    {"empty", "empty_like", "empty_strided", "zeros", "zeros_like", "ones", "full", "arange",
     "float16", "half", "bfloat16", "float32", "float", "float64", "double", "int8", "int16",
     "int32", "int64", "long", "int", "uint8", "bool", "dtype", "device", "Size", "Tensor",
     "finfo", "iinfo", "no_grad", "inference_mode", "is_tensor",
     "cuda.get_device_properties", "cuda.current_device", "cuda.is_available",
     "cuda.device_count", "cuda.get_device_capability", "cuda.get_device_name",
     "utils.cpp_extension.load_inline"}
)  # fmt: skip

FORBIDDEN_CALLS = frozenset(
    {"open", "eval", "exec", "compile", "__import__", "input", "breakpoint", "globals",
     "locals", "vars", "getattr", "setattr", "delattr", "memoryview", "exit", "quit"}
)  # fmt: skip

# Tensor methods that compute. Outside @triton.jit bodies kernel.py has no business calling them:
# the arithmetic belongs in the kernel. (Inside jit bodies these names are Triton's own.)
FORBIDDEN_METHODS = frozenset(
    {"sum", "mean", "prod", "cumsum", "cumprod", "softmax", "log_softmax", "exp", "exp2", "expm1",
     "log", "log2", "log1p", "sigmoid", "silu", "tanh", "relu", "gelu", "sqrt", "rsqrt", "pow",
     "square", "abs", "neg", "mul", "mul_", "add", "add_", "sub", "sub_", "div", "div_",
     "matmul", "mm", "bmm", "addmm", "baddbmm", "addmv", "mv", "dot", "einsum", "amax", "amin",
     "max", "min", "argmax", "logsumexp", "norm", "var", "std", "layer_norm", "rms_norm",
     "cross_entropy", "nll_loss", "scaled_dot_product_attention", "linear", "gather",
     "index_select", "scatter", "scatter_add", "where", "clamp", "clip", "masked_fill", "lerp",
     "addcmul", "addcdiv", "cos", "sin", "roll", "flip", "cat", "stack", "numpy", "tolist",
     "cpu", "apply_", "map_", "item"}
)  # fmt: skip

# Attribute names that lead out of the sandbox from any object (e.g. triton.runtime.jit.os).
ESCAPE_ATTRS = frozenset(
    {"os", "sys", "subprocess", "builtins", "importlib", "system", "popen", "modules", "socket",
     "ctypes", "environ", "shutil", "pathlib", "io"}
)  # fmt: skip
# Launching on another stream hides work from the timer's events on the current stream.
STREAM_ATTRS = frozenset({"stream", "Stream", "set_stream", "ExternalStream", "StreamContext"})

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


@dataclass(frozen=True)
class Finding:
    line: int
    what: str

    def __str__(self) -> str:
        return f"line {self.line}: {self.what}"


def _dotted(node: ast.AST) -> list[str] | None:
    """['torch', 'cuda', 'Stream'] for torch.cuda.Stream; None when the root is not a name."""
    parts: list[str] = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if isinstance(node, ast.Name):
        parts.append(node.id)
        return parts[::-1]
    return None


def _is_triton_decorated(fn: ast.FunctionDef, triton_names: set[str]) -> bool:
    for dec in fn.decorator_list:
        target = dec.func if isinstance(dec, ast.Call) else dec
        chain = _dotted(target)
        if chain and chain[0] in triton_names:
            return True
    return False


class _Checker(ast.NodeVisitor):
    def __init__(self) -> None:
        self.findings: list[Finding] = []
        self.torch_names: dict[str, str] = {}  # local alias -> torch path it stands for
        self.triton_names: set[str] = set()

    def flag(self, node: ast.AST, what: str) -> None:
        self.findings.append(Finding(getattr(node, "lineno", 0), what))

    def _check_torch_path(self, node: ast.AST, path: str) -> None:
        sub = path.removeprefix("torch").removeprefix(".")
        if (
            sub
            and sub not in ALLOWED_TORCH
            and not any(sub.startswith(a + ".") for a in ALLOWED_TORCH)
        ):
            self.flag(
                node,
                f"torch.{sub} is not allowed in kernel.py: torch may only allocate tensors and "
                "query metadata; compute in the Triton/CUDA kernel",
            )

    def visit_Import(self, node: ast.Import) -> None:
        for alias in node.names:
            root = alias.name.split(".")[0]
            if root not in ALLOWED_IMPORTS:
                self.flag(
                    node,
                    f"import of {alias.name!r} is not allowed (allowed: "
                    f"{', '.join(sorted(ALLOWED_IMPORTS - {'__future__'}))})",
                )
                continue
            local = alias.asname or root
            if root == "torch":
                self.torch_names[local] = alias.name if alias.asname else "torch"
                if alias.asname:
                    self._check_torch_path(node, alias.name)
            if root == "triton":
                self.triton_names.add(local)

    def visit_ImportFrom(self, node: ast.ImportFrom) -> None:
        module = node.module or ""
        root = module.split(".")[0]
        if node.level or root not in ALLOWED_IMPORTS:
            self.flag(node, f"import from {module or '.'!r} is not allowed")
            return
        for alias in node.names:
            if root == "torch":
                path = f"{module}.{alias.name}"
                self._check_torch_path(node, path)
                self.torch_names[alias.asname or alias.name] = path
            elif root == "triton":
                self.triton_names.add(alias.asname or alias.name)

    def visit_FunctionDef(self, node: ast.FunctionDef) -> None:
        for dec in node.decorator_list:
            self.visit(dec)
        for default in node.args.defaults + node.args.kw_defaults:
            if default is not None:
                self.visit(default)
        if _is_triton_decorated(node, self.triton_names):
            # Device code: compiled by Triton, where torch cannot run. Still no escapes.
            for sub in ast.walk(node):
                if isinstance(sub, ast.Attribute) and (
                    sub.attr.startswith("_") or sub.attr in ESCAPE_ATTRS
                ):
                    self.flag(sub, f"attribute .{sub.attr} is not allowed")
            return
        for stmt in node.body:
            self.visit(stmt)

    visit_AsyncFunctionDef = visit_FunctionDef  # type: ignore[assignment]

    def visit_Attribute(self, node: ast.Attribute) -> None:
        if node.attr.startswith("_"):
            self.flag(node, f"private or dunder attribute .{node.attr} is not allowed")
        elif node.attr in ESCAPE_ATTRS:
            self.flag(node, f"attribute .{node.attr} is not allowed in kernel.py")
        elif node.attr in STREAM_ATTRS:
            self.flag(node, f".{node.attr}: kernels must launch on the current stream")
        chain = _dotted(node)
        if chain and chain[0] in self.torch_names:
            base = self.torch_names[chain[0]]
            self._check_torch_path(node, ".".join([base, *chain[1:]]))
            return  # the whole chain is judged; do not re-judge its prefixes
        self.generic_visit(node)

    def visit_Name(self, node: ast.Name) -> None:
        # Reached only for bare uses (torch attribute chains return early): `t = torch` would
        # let `t.matmul` slip past the chain check.
        if node.id in self.torch_names and self.torch_names[node.id] not in {
            f"torch.{a}" for a in ALLOWED_TORCH
        }:
            self.flag(node, f"{node.id} may only be used as torch.<allowed name>(...)")

    def visit_Call(self, node: ast.Call) -> None:
        func = node.func
        if isinstance(func, ast.Name) and func.id in FORBIDDEN_CALLS:
            self.flag(node, f"call to {func.id}() is not allowed in kernel.py")
        if isinstance(func, ast.Attribute) and func.attr in FORBIDDEN_METHODS:
            chain = _dotted(func)
            known_root = chain and (
                chain[0] in self.triton_names or chain[0] in self.torch_names or chain[0] == "math"
            )
            if not known_root:
                self.flag(
                    node,
                    f".{func.attr}() computes with torch outside the kernel; do that arithmetic "
                    "inside the @triton.jit kernel",
                )
        self.generic_visit(node)


def check_source(source: str) -> list[Finding]:
    """Findings of the static guard (empty when clean). Raises SyntaxError on bad Python."""
    tree = ast.parse(source)
    checker = _Checker()
    checker.visit(tree)
    return checker.findings


def literal_assignment(source: str, name: str) -> object | None:
    """The value of a top-level `NAME = <literal>` in the source, without importing it."""
    for node in ast.parse(source).body:
        if isinstance(node, ast.Assign) and any(
            isinstance(t, ast.Name) and t.id == name for t in node.targets
        ):
            try:
                return ast.literal_eval(node.value)
            except ValueError:
                return None
    return None


class TorchOpMonitor(TorchDispatchMode):
    """Records aten ops outside ALLOWED_ATEN issued while kernel_fn runs (and lets them run,
    so the candidate behaves as it would unobserved; the verdict rejects it afterwards)."""

    def __init__(self) -> None:
        super().__init__()
        self.forbidden: list[str] = []

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        name = func.overloadpacket.__name__
        if name not in ALLOWED_ATEN and str(func) not in self.forbidden:
            self.forbidden.append(str(func))
        return func(*args, **(kwargs or {}))
