"""The model side of flash_attention: F.scaled_dot_product_attention without a mask or dropout,
self-attention lengths, grouped-query K/V where the call asks for it."""

from __future__ import annotations

from collections.abc import Sequence

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
    if b is None or b.get("attn_mask") is not None or b.get("dropout_p", 0.0):
        return None
    q, k, v = (b.get(n) for n in ("query", "key", "value"))
    if not floating(q, k, v) or q.dim() != 4 or k.dim() != 4 or v.dim() != 4:
        return None
    if k.shape[2] != q.shape[2]:
        return None  # cross-attention lengths: not what the flash kernel computes
    if k.shape[1] != q.shape[1] and not b.get("enable_gqa", False):
        return None
    causal, scale = bool(b.get("is_causal", False)), b.get("scale")
    sm_scale = None if scale is None else float(scale)
    extra = {"causal": causal} | ({"sm_scale": sm_scale} if sm_scale is not None else {})
    return Claim((q, k, v, causal, sm_scale), extra)


def _event(event) -> tuple[Size, dict[str, object]] | None:
    shapes = event.input_shapes
    if len(shapes) < 3 or len(shapes[0]) != 4 or len(shapes[1]) != 4:
        return None
    (b, h, s, d), (_, hkv, sk, _) = shapes[0], shapes[1]
    if sk != s:
        return None
    if event.name == "aten::scaled_dot_product_attention":
        if len(shapes) > 3 and shapes[3]:  # an explicit mask: not what a flash kernel computes
            return None
        causal, scale = bool(concrete(event, 5)), concrete(event, 6)
    else:
        causal, scale = bool(concrete(event, 4)), concrete(event, 6)
    args: dict[str, object] = {"causal": causal}
    if isinstance(scale, float):
        args["sm_scale"] = scale
    return {"batch": b, "heads": h, "kv_heads": hkv, "seq": s, "head_dim": d}, args


def _size(args: Sequence) -> Size:
    b, h, s, d = args[0].shape
    return {"batch": b, "heads": h, "kv_heads": args[1].shape[1], "seq": s, "head_dim": d}


def _contract(args: Sequence) -> str | None:
    why = dense_contract(args)
    if why:
        return why
    q, k, v = args[:3]
    if q.dim() != 4 or k.shape != v.shape or k.shape[-1] != q.shape[-1]:
        return "not (B, H, S, D) with matching K/V"
    if q.shape[1] % k.shape[1]:
        return "query heads not a multiple of key/value heads"
    return None


FLASH_ATTENTION_MODEL = ModelSide(
    "(Tensor Q, Tensor K, Tensor V, bool causal, float? sm_scale, int slot) -> Tensor",
    3,
    lambda Q, K, V, causal, sm_scale, slot: Q.new_empty((*Q.shape[:-1], V.shape[-1])),
    _size,
    "F.scaled_dot_product_attention calls without a mask or dropout",
    calls={SDPA: _sdpa},
    aten=dict.fromkeys(SDPA_ATEN, _event),
    inductor_names=("flash", "fmha", "attention", "sdpa"),
    inductor_rank=0,
    compiled="names",
    contract=_contract,
)
