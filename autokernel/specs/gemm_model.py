"""The model side of matmul: nn.Linear, 2-D products, F.linear and batched products with a
shared operand. fused_mlp's, a whole MLP module, is autokernel.specs.mlp_model."""

from __future__ import annotations

import math

import torch
from torch import nn

from autokernel.specs.gemm_batched import Finish, fold, product_note
from autokernel.specs.model_side import (
    Claim,
    ModelSide,
    ModuleSide,
    Probe,
    Size,
    bind,
    dense_contract,
    floating,
)

AFFINE_ATEN = ("aten::addmm", "aten::baddbmm", "aten::addbmm")  # the bias comes first
MATMUL_ATEN = ("aten::linear", "aten::matmul", "aten::mm", "aten::bmm", *AFFINE_ATEN)
MATMUL_CALLS = ("torch.matmul", "Tensor.matmul", "Tensor.__matmul__", "torch.mm", "Tensor.mm",
                "torch.nn.functional.linear", "torch.bmm", "Tensor.bmm", "torch.baddbmm",
                "Tensor.baddbmm")  # fmt: skip
# The argument names of the products beside torch.matmul's (input, other) and the rank torch
# requires of their operands: torch raises on other ranks, and so must the patched call.
PRODUCT_ARGS: dict[str, tuple[tuple[str, ...], int]] = {
    "mm": (("input", "mat2"), 2),
    "bmm": (("input", "mat2"), 3),
    "baddbmm": (("input", "batch1", "batch2", "beta", "alpha"), 3),
}


# ---- matmul ------------------------------------------------------------------------------------


def _linear_fn(args: tuple, kwargs: dict) -> Claim | None:
    b = bind(("input", "weight", "bias"), args, kwargs)
    if b is None:
        return None
    a, w = b.get("input"), b.get("weight")
    if not floating(a, w) or a.dim() < 2 or w.dim() != 2 or a.shape[-1] != w.shape[1]:
        return None
    lead, bias, n, k = a.shape[:-1], b.get("bias"), w.shape[0], w.shape[1]

    def finish(outs: list[torch.Tensor]) -> torch.Tensor:
        return (outs[0] if bias is None else outs[0] + bias).reshape(*lead, n)

    return Claim((a.reshape(-1, k), w.t()), finish=finish)


def _affine(product: Finish, b: dict) -> Finish | None:
    """baddbmm's beta * input + alpha * product around the folded product, or None where its
    arguments are not a floating tensor and two real numbers."""
    inp, beta, alpha = b.get("input"), b.get("beta", 1), b.get("alpha", 1)
    if not floating(inp) or not all(type(v) in (int, float) for v in (beta, alpha)):
        return None

    def finish(out: torch.Tensor) -> torch.Tensor:
        r = product(out)
        r = r if alpha == 1 else r * alpha
        if beta == 0:  # as torch documents it: input is ignored, nan and inf in it too
            return r
        return r + inp if beta == 1 else r + beta * inp

    return finish


def _product(name: str, args: tuple, kwargs: dict) -> Claim | str | None:
    """A product call as the matmul op takes it; a str: why it is not one; None: not a product
    of floating tensors as named (or one torch itself rejects), nothing to say."""
    if name.endswith("functional.linear"):
        return _linear_fn(args, kwargs)
    op = name.rsplit(".", 1)[-1]
    names, rank = PRODUCT_ARGS.get(op, (("input", "other"), 0))
    b = bind(names, args, kwargs)
    if b is None:
        return None
    first = 1 if op == "baddbmm" else 0  # baddbmm's input is the addend
    x, y = b.get(names[first]), b.get(names[first + 1])
    if not floating(x, y):
        return None
    if rank and (x.dim() != rank or y.dim() != rank or x.shape[:-2] != y.shape[:-2]):
        return None  # torch raises on these: so must the patched call
    note = product_note(x, y)
    if note is not None:
        return note
    folded = fold(x, y)
    if isinstance(folded, str):
        return folded
    finish = _affine(folded.finish, b) if op == "baddbmm" else folded.finish
    if finish is None:
        return None
    return Claim((folded.a, folded.b), finish=lambda outs: finish(outs[0]))


def _matmul_call(name: str, args: tuple, kwargs: dict) -> Claim | None:
    claim = _product(name, args, kwargs)
    return claim if isinstance(claim, Claim) else None


def _matmul_note(name: str, args: tuple, kwargs: dict) -> str | None:
    why = _product(name, args, kwargs)
    return why if isinstance(why, str) else None


def _linear_module(m: nn.Module, probe: Probe) -> str | None:
    if not isinstance(m, nn.Linear):
        return None
    if type(m).forward is not nn.Linear.forward:
        return "a Linear subclass with its own forward"
    return ""


def _linear_call(m: nn.Module, x: torch.Tensor) -> Claim | None:
    if x.shape[-1] != m.in_features:
        return None
    lead = x.shape[:-1]

    def finish(outs: list[torch.Tensor]) -> torch.Tensor:
        out = outs[0] if m.bias is None else outs[0] + m.bias
        return out.reshape(*lead, m.out_features)

    return Claim((x.reshape(-1, m.in_features), m.weight.t()), finish=finish)


def _matmul_event(event) -> tuple[Size, dict[str, object]] | None:
    """M, N, K from the operands; batched products fold the batch into M (args say so)."""
    shapes = [s for s in event.input_shapes if s]
    if event.name in AFFINE_ATEN:
        shapes = shapes[1:]
    if len(shapes) < 2:
        return None
    a, b = shapes[0], shapes[1]
    if event.name == "aten::linear":  # weight is (N, K)
        if len(b) != 2:
            return None
        return {"M": math.prod(a[:-1]), "N": b[0], "K": b[1]}, {}
    if len(a) < 2 or len(b) < 2:
        return None
    if len(b) == 2:
        return {"M": math.prod(a[:-1]), "N": b[1], "K": b[0]}, {}
    batch = math.prod(a[:-2])
    return {"M": batch * a[-2], "N": b[-1], "K": a[-1]}, {"batch": batch}


def _matmul_contract(args) -> str | None:
    why = dense_contract(args)
    if why:
        return why
    x, w = args[0], args[1]
    if x.dim() != 2 or w.dim() != 2 or x.shape[1] != w.shape[0]:
        return "not (M, K) @ (K, N)"
    return None


def _fake_matmul(A: torch.Tensor, B: torch.Tensor, slot: int) -> torch.Tensor:
    return A.new_empty((A.shape[0], B.shape[1]))


MATMUL_MODEL = ModelSide(
    "(Tensor A, Tensor B, int slot) -> Tensor",
    2,
    _fake_matmul,
    lambda a: {"M": a[0].shape[0], "N": a[1].shape[1], "K": a[0].shape[1]},
    "nn.Linear modules, products with a 2-D right operand (x @ w, torch.matmul, F.linear) and "
    "batched ones (torch.bmm, baddbmm, a @ b) with one operand shared across the batch",
    calls=dict.fromkeys(MATMUL_CALLS, _matmul_call),
    notes=dict.fromkeys(MATMUL_CALLS, _matmul_note),
    module=ModuleSide(_linear_module, _linear_call),
    aten=dict.fromkeys(MATMUL_ATEN, _matmul_event),
    compiled="shape",  # Inductor leaves GEMMs to cuBLAS through aten::mm: known by shape
    contract=_matmul_contract,
)
