"""Which module called each op: every module call becomes a profiler range with a record.

Hooks open a `record_function` range around each module's forward, labelled with the index of a
`ModuleCall` that remembers the module's path, class, what kernel type the whole module is (an
eager RMSNorm is one rmsnorm, not a reduce plus elementwise ops) and the real shape of its input.
The attribution then walks from each op up to the outermost module that claims it.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

import torch
from torch import nn

LABEL_PREFIX = "ak.module::"
MLP_NAMES = (("gate_proj", "up_proj", "down_proj"), ("w1", "w3", "w2"))  # HF and Meta naming


@dataclass
class ModuleCall:
    path: str  # 'layers.0.mlp'; '' for the model itself
    cls: str
    kind: str | None  # the kernel type the whole module computes, None: look inside
    shape: dict[str, int] = field(default_factory=dict)
    dtype: torch.dtype | None = None
    args: dict[str, object] = field(default_factory=dict)
    needs: str | None = None  # an aten op that must run inside for `kind` to hold

    @property
    def pattern(self) -> str:
        """'layers.*.mlp': the path with layer indices folded, so repeated layers group."""
        return re.sub(r"\.\d+(?=\.|$)", ".*", self.path) or "(model)"


def _eps(module: nn.Module, dtype: torch.dtype) -> float:
    eps = getattr(module, "eps", None)
    if eps is None:
        eps = getattr(module, "variance_epsilon", None)
    if eps is None:  # nn.RMSNorm(eps=None) uses the dtype's machine epsilon
        eps = torch.finfo(dtype).eps if dtype.is_floating_point else 1e-6
    return float(eps)


def _rows_cols(x: torch.Tensor) -> dict[str, int]:
    cols = x.shape[-1] if x.dim() else 1
    return {"rows": x.numel() // max(cols, 1), "cols": cols}


def _mlp_linears(module: nn.Module) -> tuple[nn.Linear, nn.Linear, nn.Linear] | None:
    for names in MLP_NAMES:
        parts = [getattr(module, n, None) for n in names]
        if all(isinstance(p, nn.Linear) for p in parts):
            return parts[0], parts[1], parts[2]
    return None


def classify(module: nn.Module, x: torch.Tensor | None) -> ModuleCall:
    """The kernel type a module computes as a whole, from its class and input (path unset)."""
    name = type(module).__name__
    call = ModuleCall(path="", cls=name, kind=None)
    if x is None or not x.is_floating_point():
        return call
    call.dtype = x.dtype
    lname = name.lower()
    rms_cls = getattr(nn, "RMSNorm", ())
    weight = getattr(module, "weight", None)
    has_bias = getattr(module, "bias", None) is not None
    if isinstance(module, rms_cls) or "rmsnorm" in lname:
        call.kind = "rmsnorm"
    elif isinstance(module, nn.LayerNorm) or ("layernorm" in lname and has_bias):
        call.kind = "layernorm"
    elif (
        isinstance(weight, torch.Tensor)
        and weight.dim() == 1
        and not has_bias
        and (hasattr(module, "eps") or hasattr(module, "variance_epsilon"))
    ):
        # Unnamed RMSNorm: a scale and an eps; it counts only if it really takes an rsqrt.
        call.kind, call.needs = "rmsnorm", "aten::rsqrt"
    if call.kind in ("rmsnorm", "layernorm"):
        call.shape, call.args = _rows_cols(x), {"eps": _eps(module, x.dtype)}
        return call
    linears = _mlp_linears(module)
    if linears is not None:
        gate = linears[0]
        call.kind, call.needs = "fused_mlp", "aten::silu"
        call.shape = {
            "M": x.numel() // gate.in_features,
            "hidden": gate.in_features,
            "inter": gate.out_features,
        }
    elif isinstance(module, nn.Linear):
        call.kind = "matmul"
        k = module.in_features
        call.shape = {"M": x.numel() // k, "N": module.out_features, "K": k}
    return call


def _first_tensor(args: tuple, kwargs: dict) -> torch.Tensor | None:
    for value in (*args, *kwargs.values()):
        if isinstance(value, torch.Tensor):
            return value
    return None


class ModuleRecorder:
    """Installs the hooks on every submodule; `calls[i]` describes range `ak.module::i`."""

    def __init__(self, model: nn.Module) -> None:
        self.calls: list[ModuleCall] = []
        self._open: list[object] = []
        self._handles = []
        for path, module in model.named_modules():
            self._handles.append(
                module.register_forward_pre_hook(self._pre(path), with_kwargs=True)
            )
            self._handles.append(module.register_forward_hook(self._post, always_call=True))

    def _pre(self, path: str):
        def hook(module: nn.Module, args: tuple, kwargs: dict) -> None:
            call = classify(module, _first_tensor(args, kwargs))
            call.path = path
            self.calls.append(call)
            rf = torch.profiler.record_function(f"{LABEL_PREFIX}{len(self.calls) - 1}")
            rf.__enter__()
            self._open.append(rf)

        return hook

    def _post(self, module: nn.Module, args: tuple, output: object) -> None:
        if self._open:
            self._open.pop().__exit__(None, None, None)

    def remove(self) -> None:
        for h in self._handles:
            h.remove()
        self._handles.clear()

    def call_of(self, label: str) -> ModuleCall | None:
        if not label.startswith(LABEL_PREFIX):
            return None
        return self.calls[int(label.removeprefix(LABEL_PREFIX))]
