"""The model side of each kernel type, one entry per type: what attribution, the custom ops and
patching read about it.

An entry holds the op's call contract (the torch.library schema, how many tensors lead its
arguments, the fake implementation that gives torch.compile its output shape), how a call's
size is written in the spec's dims (what plan.yaml records and a Router matches plan shapes
by), which torch calls and which module or function kinds the matcher may claim for it
(autokernel.model.matcher implements each), and the one line verify prints when nothing in a
model matched. The harness side (sizes, inputs, tolerances) is the type's KernelSpec.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

import torch

from autokernel.specs import GENERIC, SPECS

Size = dict[str, int]


@dataclass(frozen=True)
class ModelSide:
    schema: str  # torch.library schema after the op's name; the last argument is the slot
    n_tensors: int  # tensors leading the arguments (a call's route is cached by them)
    fake: Callable[..., torch.Tensor]  # output shape and dtype, no data
    size: Callable[[Sequence], Size]  # the call's size in the spec's dims
    where: str  # what verify looks for in a model, for "nothing matched"
    calls: tuple[str, ...] = ()  # torch call names (calls.api_name) the matcher may claim
    modules: bool = False  # module forwards the matcher may claim
    functions: bool = False  # the model's own module-level functions the matcher may claim


def _like(x: torch.Tensor, *_args: object) -> torch.Tensor:
    return torch.empty_like(x, memory_format=torch.contiguous_format)


def _rows_cols(args: Sequence) -> Size:
    a = args[0]
    return {"rows": a.numel() // max(1, a.shape[-1]), "cols": a.shape[-1]}


def _cross_entropy_fake(logits: torch.Tensor, targets: torch.Tensor, slot: int) -> torch.Tensor:
    out = torch.float64 if logits.dtype == torch.float64 else torch.float32
    return logits.new_empty((), dtype=out)


def _attention_size(args: Sequence) -> Size:
    b, h, s, d = args[0].shape
    return {"batch": b, "heads": h, "kv_heads": args[1].shape[1], "seq": s, "head_dim": d}


SOFTMAX_CALLS = ("torch.softmax", "Tensor.softmax", "torch.nn.functional.softmax")
SUM_CALLS = ("torch.sum", "Tensor.sum")
MATMUL_CALLS = ("torch.matmul", "Tensor.matmul", "Tensor.__matmul__", "torch.mm", "Tensor.mm",
                "torch.nn.functional.linear")  # fmt: skip

KINDS: dict[str, ModelSide] = {
    "matmul": ModelSide(
        "(Tensor A, Tensor B, int slot) -> Tensor",
        2,
        lambda A, B, slot: A.new_empty((A.shape[0], B.shape[1])),
        lambda a: {"M": a[0].shape[0], "N": a[1].shape[1], "K": a[0].shape[1]},
        "nn.Linear modules and 2-D products (x @ w, torch.matmul, F.linear)",
        calls=MATMUL_CALLS,
        modules=True,
    ),
    "flash_attention": ModelSide(
        "(Tensor Q, Tensor K, Tensor V, bool causal, float? sm_scale, int slot) -> Tensor",
        3,
        lambda Q, K, V, causal, sm_scale, slot: Q.new_empty((*Q.shape[:-1], V.shape[-1])),
        _attention_size,
        "F.scaled_dot_product_attention calls without a mask or dropout",
        calls=("torch.nn.functional.scaled_dot_product_attention",),
    ),
    "fused_mlp": ModelSide(
        "(Tensor x, Tensor w_gate, Tensor w_up, Tensor w_down, int slot) -> Tensor",
        4,
        lambda x, wg, wu, wd, slot: x.new_empty((*x.shape[:-1], wd.shape[0])),
        lambda a: {
            "M": a[0].numel() // a[0].shape[-1],
            "hidden": a[0].shape[-1],
            "inter": a[1].shape[0],
        },
        "modules with gate_proj/up_proj/down_proj or w1/w3/w2 Linears computing SwiGLU",
        modules=True,
    ),
    "softmax": ModelSide(
        "(Tensor x, int slot) -> Tensor",
        1,
        _like,
        _rows_cols,
        "softmax over the last dim (torch.softmax, F.softmax, x.softmax)",
        calls=SOFTMAX_CALLS,
    ),
    "layernorm": ModelSide(
        "(Tensor x, Tensor weight, Tensor bias, float eps, int slot) -> Tensor",
        3,
        _like,
        _rows_cols,
        "nn.LayerNorm modules and F.layer_norm over the last dim with weight, bias",
        calls=("torch.nn.functional.layer_norm",),
        modules=True,
    ),
    "rmsnorm": ModelSide(
        "(Tensor x, Tensor weight, float eps, int slot) -> Tensor",
        2,
        _like,
        _rows_cols,
        "modules that compute RMSNorm with a weight (probed), F.rms_norm with a weight",
        calls=("torch.nn.functional.rms_norm", "torch.rms_norm"),
        modules=True,
    ),
    "cross_entropy": ModelSide(
        "(Tensor logits, Tensor targets, int slot) -> Tensor",
        2,
        _cross_entropy_fake,
        lambda a: {"rows": a[0].shape[0], "vocab": a[0].shape[1]},
        "F.cross_entropy calls (mean, ignore_index -100, no weights or smoothing)",
        calls=("torch.nn.functional.cross_entropy",),
    ),
    "rotary_embedding": ModelSide(
        "(Tensor x, Tensor cos, Tensor sin, int slot) -> Tensor",
        3,
        _like,
        lambda a: dict(zip(("batch", "heads", "seq", "head_dim"), a[0].shape, strict=True)),
        "model functions that compute rotary embeddings on (B, H, S, D) tensors (probed)",
        functions=True,
    ),
    "reduce": ModelSide(
        "(Tensor x, int slot) -> Tensor",
        1,
        lambda x, slot: x.new_empty(x.shape[:-1]),
        _rows_cols,
        "floating-point sums over the last dim (torch.sum, x.sum)",
        calls=SUM_CALLS,
    ),
}
assert set(KINDS) == set(SPECS), "one model side per kernel type"

# A generic target's op takes the region's tensors as one list; its output shape comes from
# the region's description (autokernel.model.generic_ops).
GENERIC_SCHEMA = "(Tensor[] xs, int slot) -> Tensor"


def call_size(kind: str, args: Sequence) -> Size:
    """The call's size in the spec's dims, as plan.yaml records real shapes."""
    return KINDS[kind].size(args)


def same_size(kind: str, call: Mapping[str, int], planned: Mapping[str, int]) -> bool:
    """Row-wise plans may split rows into batch x rows; compare the flattened row count."""
    if kind in ("softmax", "layernorm", "rmsnorm", "reduce"):
        rows = planned.get("batch", 1) * planned.get("rows", 0)
        return (rows, planned.get("cols")) == (call["rows"], call["cols"])
    if kind == GENERIC:
        return dict(call) == dict(planned)
    return all(planned[k] == v for k, v in call.items() if k in planned)
