"""The function half of patching: wrappers swapped in for torch functions while a Patch is active.

Each wrapper passes straight through while an op runs (the reference itself calls torch.softmax),
counts every call it sees as a site of its kernel type, hands calls inside the kernel contract to
the custom op and runs the original on the rest, counting the reason. See autokernel.patching.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from typing import Protocol

import torch
import torch.nn.functional as F

from autokernel import kernel_ops
from autokernel.kernel_ops import Router


class Patch(Protocol):
    """What a wrapper needs of autokernel.patching.Patch, which imports this module: each
    type's op slot, and the router that counts the calls it sees."""

    slots: dict[str, int]

    def seen(self, kind: str) -> Router: ...


ROTARY_NAMES = ("apply_rotary", "apply_rotary_pos_emb")


def n_required(fn: Callable) -> int:
    params = inspect.signature(fn).parameters.values()
    return sum(p.default is p.empty and p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)
               for p in params)  # fmt: skip


FUNCTIONS: dict[str, list[tuple[object, str]]] = {
    "flash_attention": [(F, "scaled_dot_product_attention")],
    "softmax": [(F, "softmax"), (torch, "softmax")],
    "cross_entropy": [(F, "cross_entropy")],
    "reduce": [(torch, "sum")],
}


def _sdpa_wrapper(original: Callable, patch: Patch, kind: str) -> Callable:
    slot = patch.slots[kind]

    def sdpa(query, key, value, attn_mask=None, dropout_p=0.0, is_causal=False, scale=None,
             enable_gqa=False):  # fmt: skip
        if kernel_ops.in_op():
            return original(query, key, value, attn_mask, dropout_p, is_causal, scale=scale,
                            enable_gqa=enable_gqa)  # fmt: skip
        router = patch.seen(kind)
        why = ("attn_mask given" if attn_mask is not None else
               "dropout" if dropout_p else
               "not 4-D" if query.dim() != 4 or key.dim() != 4 else
               "fewer key/value heads without enable_gqa"
               if key.shape[1] != query.shape[1] and not enable_gqa else "")  # fmt: skip
        if why:
            router.fallback(why)
            return original(query, key, value, attn_mask, dropout_p, is_causal, scale=scale,
                            enable_gqa=enable_gqa)  # fmt: skip
        sm_scale = None if scale is None else float(scale)
        return kernel_ops.flash_attention(query, key, value, bool(is_causal), sm_scale, slot)

    return sdpa


def _softmax_wrapper(original: Callable, patch: Patch, kind: str) -> Callable:
    slot = patch.slots[kind]
    dtype_at = 3 if original is F.softmax else 2  # F.softmax has _stacklevel before dtype

    def softmax(*args, **kwargs):
        if kernel_ops.in_op():
            return original(*args, **kwargs)
        router = patch.seen(kind)
        x = args[0] if args else kwargs.get("input")
        dim = args[1] if len(args) > 1 else kwargs.get("dim")
        dtype = args[dtype_at] if len(args) > dtype_at else kwargs.get("dtype")
        if not isinstance(x, torch.Tensor) or not isinstance(dim, int) or x.dim() == 0:
            router.fallback("not softmax(tensor, int dim)")
            return original(*args, **kwargs)
        if dim not in (-1, x.dim() - 1):
            router.fallback("not over the last dim")
            return original(*args, **kwargs)
        return kernel_ops.softmax(x if dtype is None else x.to(dtype), slot)

    return softmax


def _cross_entropy_wrapper(original: Callable, patch: Patch, kind: str) -> Callable:
    slot = patch.slots[kind]
    plain = {"weight": None, "size_average": None, "ignore_index": -100, "reduce": None,
             "reduction": "mean", "label_smoothing": 0.0}  # fmt: skip
    names = list(inspect.signature(original).parameters)

    def cross_entropy(*args, **kwargs):
        if kernel_ops.in_op():
            return original(*args, **kwargs)
        router = patch.seen(kind)
        bound = dict(zip(names, args, strict=False)) | kwargs
        logits, targets = bound.get("input"), bound.get("target")
        odd = [k for k, v in plain.items() if k in bound and bound[k] != v]
        if odd:
            router.fallback(f"{', '.join(odd)} not the default")
            return original(*args, **kwargs)
        if logits.dim() != 2 or targets.dim() != 1 or targets.dtype != torch.int64:
            router.fallback("not (N, V) logits with int64 class targets")
            return original(*args, **kwargs)
        return kernel_ops.cross_entropy(logits, targets, slot).to(logits.dtype)

    return cross_entropy


def _sum_wrapper(original: Callable, patch: Patch, kind: str) -> Callable:
    slot = patch.slots[kind]

    def sum_(*args, **kwargs):
        if kernel_ops.in_op():
            return original(*args, **kwargs)
        router = patch.seen(kind)
        x = args[0] if args else kwargs.get("input")
        dim = args[1] if len(args) > 1 else kwargs.get("dim")
        keepdim = args[2] if len(args) > 2 else kwargs.get("keepdim", False)
        if isinstance(dim, (tuple, list)) and len(dim) == 1:
            dim = dim[0]
        extra = set(kwargs) - {"input", "dim", "keepdim"}
        last = isinstance(x, torch.Tensor) and x.dim() > 0 and dim in (-1, x.dim() - 1)
        if extra or len(args) > 3 or not last or not x.is_floating_point():
            router.fallback("not a floating-point sum over the last dim")
            return original(*args, **kwargs)
        out = kernel_ops.reduce(x, slot)
        return out.unsqueeze(-1) if keepdim else out

    return sum_


def rotary_wrapper(original: Callable, patch: Patch) -> Callable:
    kind = "rotary_embedding"
    slot = patch.slots[kind]
    pair = n_required(original) >= 4

    def table(t: torch.Tensor, x: torch.Tensor) -> torch.Tensor | None:
        ok = t.shape[-2:] == x.shape[-2:] and all(n == 1 for n in t.shape[:-2])
        return t.reshape(x.shape[-2:]) if ok and x.dim() == 4 else None

    def rotary(*args, **kwargs):
        if kernel_ops.in_op():
            return original(*args, **kwargs)
        router = patch.seen(kind)
        xs, (cos, sin) = (args[:2], args[2:4]) if pair else (args[:1], args[1:3])
        extra = args[4:] if pair else args[3:]
        c, s = (table(t, xs[0]) for t in (cos, sin)) if len(args) >= len(xs) + 2 else (None, None)
        if c is None or s is None or kwargs or extra:
            router.fallback("cos/sin not (S, D) tables for (B, H, S, D) inputs")
            return original(*args, **kwargs)
        out = tuple(kernel_ops.rotary_embedding(x, c, s, slot) for x in xs)
        return out if pair else out[0]

    return rotary


WRAPPERS = {
    "flash_attention": _sdpa_wrapper,
    "softmax": _softmax_wrapper,
    "cross_entropy": _cross_entropy_wrapper,
    "reduce": _sum_wrapper,
}
