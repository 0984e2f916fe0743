"""Sizes as expressions over a region's symbols ('s0*s1', 'FloorDiv(s2, 2)', '8'): what a
region description says about an input's sizes and strides, evaluated at the model's values or
at perturbed ones. Only integers, the symbols, + - * // % ** and the size functions sympy
prints (FloorDiv, CeilDiv, Mod, Max, Min) can appear: an expression cannot run anything else.
"""

from __future__ import annotations

import ast
import operator
from collections.abc import Callable, Mapping

from autokernel import syntax


class RegionError(ValueError):
    """A description that names something a region cannot hold, or does not fit its inputs
    (here, so that a size expression's errors are a region's: specs/region.py raises it too)."""


_EXPR_CALLS: dict[str, Callable[..., int]] = {
    "FloorDiv": operator.floordiv, "CleanDiv": operator.floordiv, "Mod": operator.mod,
    "PythonMod": operator.mod, "Max": max, "Min": min, "CeilDiv": lambda a, b: -(-a // b),
}  # fmt: skip
_EXPR_BINOPS = {
    ast.Add: operator.add, ast.Sub: operator.sub, ast.Mult: operator.mul,
    ast.FloorDiv: operator.floordiv, ast.Mod: operator.mod, ast.Pow: operator.pow,
}  # fmt: skip


def eval_expr(expr: str, values: Mapping[str, int]) -> int:
    """An integer expression over symbols ('s0*s1', 'FloorDiv(s2, 2)', '8') at `values`."""
    try:
        tree = syntax.parse(expr, mode="eval")
    except SyntaxError:
        raise RegionError(f"size expression {expr!r} does not parse") from None
    return int(_eval(tree.body, values, expr))


def compile_expr(expr: str) -> Callable[[Mapping[str, int]], int]:
    """eval_expr's expression parsed once: a closure over the syntax tree, which torch.compile
    can trace where it cannot parse (verify cuts a region's outputs apart with these)."""
    try:
        tree = syntax.parse(expr, mode="eval").body
    except SyntaxError:
        raise RegionError(f"size expression {expr!r} does not parse") from None
    eval_expr(expr, _Any())  # refuse what _eval refuses, now
    return lambda values: int(_eval(tree, values, expr))


class _Any(dict):
    """Every symbol 2: enough to walk an expression's tree once."""

    def __contains__(self, key: object) -> bool:
        return True

    def __getitem__(self, key: str) -> int:
        return 2


def _eval(node: ast.AST, values: Mapping[str, int], expr: str) -> int:
    if isinstance(node, ast.Constant) and type(node.value) is int:
        return node.value
    if isinstance(node, ast.Name) and node.id in values:
        return values[node.id]
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
        return -_eval(node.operand, values, expr)
    if isinstance(node, ast.BinOp) and type(node.op) in _EXPR_BINOPS:
        left, right = _eval(node.left, values, expr), _eval(node.right, values, expr)
        return _EXPR_BINOPS[type(node.op)](left, right)
    if (
        isinstance(node, ast.Call) and isinstance(node.func, ast.Name)
        and node.func.id in _EXPR_CALLS and not node.keywords
    ):  # fmt: skip
        return _EXPR_CALLS[node.func.id](*(_eval(a, values, expr) for a in node.args))
    raise RegionError(f"size expression {expr!r}: {ast.dump(node)[:80]} is not a size")
