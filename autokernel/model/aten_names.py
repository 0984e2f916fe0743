"""Kernel types read off aten op names: how the compiled model's profile is split by type.

The eager profile attributes ops to what the matcher claimed (autokernel.model.matcher, through
the recorded ranges). A profile of torch.compile's forward has no such ranges, only the ops the
compiled graph still calls (an extern matmul, an attention) and Inductor's kernels, so its time
is grouped by op name here: compile_profile.py sets the compiled model's time per target against
the eager plan with it.
"""

from __future__ import annotations

import math

MATMUL_OPS = {"aten::linear", "aten::matmul", "aten::mm", "aten::bmm", "aten::addmm",
              "aten::baddbmm", "aten::addbmm"}  # fmt: skip
SDPA_OPS = {
    "aten::scaled_dot_product_attention",
    "aten::_scaled_dot_product_flash_attention",
    "aten::_scaled_dot_product_efficient_attention",
    "aten::_scaled_dot_product_cudnn_attention",
    "aten::_scaled_dot_product_flash_attention_for_cpu",
}


def _concrete(event, index: int) -> object:
    values = getattr(event, "concrete_inputs", None) or []
    return values[index] if index < len(values) else None


def _last_dim(dim: object, ndim: int) -> bool:
    if isinstance(dim, (list, tuple)):
        if len(dim) != 1:
            return False
        dim = dim[0]
    return isinstance(dim, int) and dim in (-1, ndim - 1)


def _rows_cols(shape: list[int]) -> dict[str, int]:
    return {"rows": math.prod(shape[:-1]), "cols": shape[-1]}


def _matmul(event) -> tuple[dict[str, int], dict[str, object]] | None:
    """M, N, K from the operands; batched products fold the batch into M (args say so)."""
    shapes = [s for s in event.input_shapes if s]
    name = event.name
    if name in ("aten::addmm", "aten::baddbmm", "aten::addbmm"):
        shapes = shapes[1:]
    if len(shapes) < 2:
        return None
    a, b = shapes[0], shapes[1]
    if name == "aten::linear":  # weight is (N, K)
        if len(b) != 2:
            return None
        return {"M": math.prod(a[:-1]), "N": b[0], "K": b[1]}, {}
    if len(a) < 2 or len(b) < 2:
        return None
    if len(b) == 2:
        return {"M": math.prod(a[:-1]), "N": b[1], "K": b[0]}, {}
    batch = math.prod(a[:-2])
    return {"M": batch * a[-2], "N": b[-1], "K": a[-1]}, {"batch": batch}


def _attention(event) -> tuple[dict[str, int], dict[str, object]] | None:
    shapes = event.input_shapes
    if len(shapes) < 3 or len(shapes[0]) != 4 or len(shapes[1]) != 4:
        return None
    (b, h, s, d), (_, hkv, sk, _) = shapes[0], shapes[1]
    if sk != s:
        return None
    if event.name == "aten::scaled_dot_product_attention":
        if len(shapes) > 3 and shapes[3]:  # an explicit mask: not what a flash kernel computes
            return None
        causal, scale = bool(_concrete(event, 5)), _concrete(event, 6)
    else:
        causal, scale = bool(_concrete(event, 4)), _concrete(event, 6)
    args: dict[str, object] = {"causal": causal}
    if isinstance(scale, float):
        args["sm_scale"] = scale
    return {"batch": b, "heads": h, "kv_heads": hkv, "seq": s, "head_dim": d}, args


def classify_op(event) -> tuple[str, dict[str, int], dict[str, object]]:
    """(kernel type or 'other', shape in the spec's dims, args) of a top-level aten op."""
    name, shapes = event.name, event.input_shapes
    first = shapes[0] if shapes else []
    found = None
    if name in MATMUL_OPS:
        found = _matmul(event)
        kind = "matmul"
    elif name in SDPA_OPS:
        found = _attention(event)
        kind = "flash_attention"
    elif name in ("aten::softmax", "aten::_softmax", "aten::special_softmax") and first:
        kind = "softmax"
        found = (_rows_cols(first), {}) if _last_dim(_concrete(event, 1), len(first)) else None
    elif name in ("aten::layer_norm", "aten::native_layer_norm") and first:
        kind = "layernorm"
        normalized = _concrete(event, 1)
        if isinstance(normalized, (list, tuple)) and len(normalized) == 1:
            eps = _concrete(event, 4)
            found = (_rows_cols(first), {"eps": eps} if isinstance(eps, float) else {})
    elif name in ("aten::rms_norm", "aten::_fused_rms_norm") and first:
        kind = "rmsnorm"
        eps = _concrete(event, 3)
        found = (_rows_cols(first), {"eps": eps} if isinstance(eps, float) else {})
    elif name == "aten::cross_entropy_loss" and len(first) == 2:
        kind = "cross_entropy"
        found = ({"rows": first[0], "vocab": first[1]}, {})
    elif name == "aten::sum" and first:
        kind = "reduce"
        found = (_rows_cols(first), {}) if _last_dim(_concrete(event, 1), len(first)) else None
    if found is None:
        return "other", {}, {}
    return kind, found[0], found[1]
