"""The model side of flash_attention: F.scaled_dot_product_attention without dropout,
self-attention lengths, grouped-query K/V where the call asks for it, and a caller's attn_mask
(bool or floating, broadcastable to the scores).

Masked calls matter under torch.compile: Hugging Face encoders (transformers 5.17) then pass an
all-ones mask expanded with zero strides that none of PyTorch's fused backends takes, and SDPA
falls back to its math path in fp32 (on the H100, BERT's compiled forward was 0.45x eager for
it, 1.77x faster with this kernel; benchmarks/results/h100-compilemode-models-2026-12-06.md)."""

from __future__ import annotations

from collections.abc import Sequence

import torch

from autokernel.specs.model_side import (
    Claim,
    ModelSide,
    Size,
    bind,
    concrete,
    dense_contract,
    floating,
)

SDPA = "torch.nn.functional.scaled_dot_product_attention"
SDPA_ATEN = (
    "aten::scaled_dot_product_attention",
    "aten::_scaled_dot_product_flash_attention",
    "aten::_scaled_dot_product_efficient_attention",
    "aten::_scaled_dot_product_cudnn_attention",
    "aten::_scaled_dot_product_flash_attention_for_cpu",
)


def _sdpa(name: str, args: tuple, kwargs: dict) -> Claim | None:
    names = ("query", "key", "value", "attn_mask", "dropout_p", "is_causal", "scale", "enable_gqa")
    b = bind(names, args, kwargs)
    if b is None or b.get("dropout_p", 0.0):
        return None
    q, k, v = (b.get(n) for n in ("query", "key", "value"))
    if not floating(q, k, v) or q.dim() != 4 or k.dim() != 4 or v.dim() != 4:
        return None
    if k.shape[2] != q.shape[2]:
        return None  # cross-attention lengths: not what the flash kernel computes
    if k.shape[1] != q.shape[1] and not b.get("enable_gqa", False):
        return None
    causal, scale, mask = bool(b.get("is_causal", False)), b.get("scale"), b.get("attn_mask")
    if mask is not None and (causal or _mask_why(mask, q) is not None):
        return None  # SDPA itself rejects a mask with is_causal
    sm_scale = None if scale is None else float(scale)
    extra = {"causal": causal} | ({"sm_scale": sm_scale} if sm_scale is not None else {})
    if mask is not None:
        extra["mask"] = 1
    return Claim((q, k, v, causal, sm_scale, mask), extra)


def _mask_why(mask: object, q) -> str | None:
    """Why attn_mask is not one the kernel reads (bool or floating, broadcastable to the
    (batch, heads, seq, seq) scores), or None."""
    if not isinstance(mask, torch.Tensor):
        return "attn_mask not a tensor"
    if mask.dtype != torch.bool and not mask.is_floating_point():
        return f"attn_mask of dtype {str(mask.dtype).removeprefix('torch.')}"
    b, h, s, _ = q.shape
    if mask.dim() > 4 or any(
        m not in (1, want) for m, want in zip(reversed(mask.shape), (s, s, h, b), strict=False)
    ):
        return f"attn_mask {tuple(mask.shape)} does not broadcast to {(b, h, s, s)}"
    if mask.device != q.device:
        return "attn_mask on another device"
    return None


def _event(event) -> tuple[Size, dict[str, object]] | None:
    shapes = event.input_shapes
    if len(shapes) < 3 or len(shapes[0]) != 4 or len(shapes[1]) != 4:
        return None
    (b, h, s, d), (_, hkv, sk, _) = shapes[0], shapes[1]
    if sk != s:
        return None
    masked = False
    if event.name == "aten::scaled_dot_product_attention":
        masked = len(shapes) > 3 and bool(shapes[3])
        causal, scale = bool(concrete(event, 5)), concrete(event, 6)
    else:
        causal, scale = bool(concrete(event, 4)), concrete(event, 6)
    if masked and causal:
        return None
    args: dict[str, object] = {"causal": causal}
    if masked:
        args["mask"] = 1  # the harness times the model's shape under a padding mask
    if isinstance(scale, float):
        args["sm_scale"] = scale
    return {"batch": b, "heads": h, "kv_heads": hkv, "seq": s, "head_dim": d}, args


def _size(args: Sequence) -> Size:
    b, h, s, d = args[0].shape
    return {"batch": b, "heads": h, "kv_heads": args[1].shape[1], "seq": s, "head_dim": d}


def _contract(args: Sequence) -> str | None:
    why = dense_contract(args[:3])
    if why:
        return why
    q, k, v = args[:3]
    if q.dim() != 4 or k.shape != v.shape or k.shape[-1] != q.shape[-1]:
        return "not (B, H, S, D) with matching K/V"
    if q.shape[1] % k.shape[1]:
        return "query heads not a multiple of key/value heads"
    if len(args) > 5 and args[5] is not None:
        return _mask_why(args[5], q)
    return None


def _route_key(args: Sequence) -> tuple:
    """What a call's route depends on besides Q, K, V: whether a mask comes, and its form."""
    mask = args[5] if len(args) > 5 else None
    return () if mask is None else (mask.shape, mask.dtype, mask.device)


FLASH_ATTENTION_MODEL = ModelSide(
    "(Tensor Q, Tensor K, Tensor V, bool causal, float? sm_scale, Tensor? attn_mask, int slot)"
    " -> Tensor",
    3,
    # Contiguous whatever Q's strides: Inductor may lay Q out otherwise at run time than when
    # it traced, and it asserts the output strides the fake gave then.
    lambda Q, K, V, causal, sm_scale, mask, slot: Q.new_empty((*Q.shape[:-1], V.shape[-1])),
    _size,
    "F.scaled_dot_product_attention calls without dropout",
    calls={SDPA: _sdpa},
    aten=dict.fromkeys(SDPA_ATEN, _event),
    inductor_names=("flash", "fmha", "attention", "sdpa"),
    inductor_rank=0,
    compiled="names",
    contract=_contract,
    route_key=_route_key,
)
