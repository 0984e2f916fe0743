"""Optimized kernels as `torch.library` custom ops: one op per kernel type, routed per call.

Each op (`torch.ops.autokernel.<type>`) has a fake implementation, so a patched model still
traces under torch.compile, where the op stays one opaque node. The real implementation looks
up a Router by the op's `slot` argument: the kernels of that type a Patch loaded, plus call
counters. Routing policy:

- a call the kernel's contract does not cover (a dtype outside fp16/bf16/fp32, mixed dtypes,
  a CPU tensor without the Triton interpreter, a shape the reference rejects) runs the
  reference PyTorch implementation and is counted as a fallback with its reason;
- otherwise the kernel whose plan shapes contain the call's size runs; with no such kernel,
  policy "dtype" (default: a kernel that passed the harness's sweep is correct at any size)
  runs the type's first kernel, policy "plan" falls back (only what was measured runs).

Kernel files are loaded by path under unique module names, never from the user's cwd.
The ops are inference ops: they have no autograd formula.
"""

from __future__ import annotations

import contextlib
import hashlib
import importlib.util
import itertools
import os
import threading
from collections import Counter
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

import torch

if not torch.cuda.is_available():
    # Triton reads this once, when it is first imported (its own tl.sum etc. are jit functions):
    # set it here, before anything imports triton, so kernels run on CPU tensors.
    os.environ.setdefault("TRITON_INTERPRET", "1")

import reference
from autokernel.specs import DTYPES, SPECS

NAMESPACE = "autokernel"
Policy = Literal["dtype", "plan"]


class KernelLoadError(Exception):
    """A kernel file that cannot be used: missing, does not import, no kernel_fn or type."""


@dataclass
class LoadedKernel:
    name: str  # the target's name (optimized/<name>.py)
    kernel_type: str
    fn: Callable
    path: Path
    shapes: tuple[Mapping[str, int], ...] = ()  # the plan's real shapes, if known


def load_kernel(path: Path, name: str | None = None, shapes: Sequence = ()) -> LoadedKernel:
    """Import a kernel file by path. On a machine without CUDA, Triton's interpreter is switched
    on first: `triton.jit` reads TRITON_INTERPRET when the kernel module is executed."""
    path = Path(path).resolve()
    if not path.is_file():
        raise KernelLoadError(f"{path}: no such kernel file")
    _check_interpreter()
    digest = hashlib.sha1(str(path).encode()).hexdigest()[:12]
    mod_name = f"autokernel_loaded_{path.stem}_{digest}_{next(_SERIAL)}"
    spec = importlib.util.spec_from_file_location(mod_name, path)
    if spec is None or spec.loader is None:
        raise KernelLoadError(f"{path}: not a Python file")
    module = importlib.util.module_from_spec(spec)
    try:
        spec.loader.exec_module(module)
    except Exception as exc:  # a user's kernel file may raise anything at import
        raise KernelLoadError(f"{path}: import failed: {type(exc).__name__}: {exc}") from exc
    kind, fn = getattr(module, "KERNEL_TYPE", None), getattr(module, "kernel_fn", None)
    if kind not in SPECS:
        raise KernelLoadError(f"{path}: KERNEL_TYPE is {kind!r}, not one of {', '.join(SPECS)}")
    if not callable(fn):
        raise KernelLoadError(f"{path}: defines no kernel_fn")
    return LoadedKernel(name or path.stem, kind, fn, path, tuple(dict(s) for s in shapes))


_SERIAL = itertools.count()


def _check_interpreter() -> None:
    """Without CUDA, Triton must have been imported with the interpreter on."""
    if torch.cuda.is_available():
        return
    import triton.language as tl

    if type(tl.sum).__name__ != "InterpretedFunction":
        raise KernelLoadError(
            "no CUDA, and Triton was imported before TRITON_INTERPRET=1 was set: "
            "start again with TRITON_INTERPRET=1 in the environment"
        )


def interpreter_on() -> bool:
    return os.environ.get("TRITON_INTERPRET", "0") not in ("", "0")


def call_size(kind: str, args: Sequence) -> dict[str, int]:
    """The call's size in the spec's dims, as plan.yaml records real shapes."""
    a = args[0]
    if kind == "matmul":
        return {"M": a.shape[0], "N": args[1].shape[1], "K": a.shape[1]}
    if kind == "flash_attention":
        b, h, s, d = a.shape
        return {"batch": b, "heads": h, "kv_heads": args[1].shape[1], "seq": s, "head_dim": d}
    if kind == "fused_mlp":
        return {"M": a.numel() // a.shape[-1], "hidden": a.shape[-1], "inter": args[1].shape[0]}
    if kind == "cross_entropy":
        return {"rows": a.shape[0], "vocab": a.shape[1]}
    if kind == "rotary_embedding":
        return dict(zip(("batch", "heads", "seq", "head_dim"), a.shape, strict=True))
    return {"rows": a.numel() // max(1, a.shape[-1]), "cols": a.shape[-1]}  # row-wise types


def same_size(kind: str, call: Mapping[str, int], planned: Mapping[str, int]) -> bool:
    """Row-wise plans may split rows into batch x rows; compare the flattened row count."""
    if kind in ("softmax", "layernorm", "rmsnorm", "reduce"):
        rows = planned.get("batch", 1) * planned.get("rows", 0)
        return (rows, planned.get("cols")) == (call["rows"], call["cols"])
    return all(planned[k] == v for k, v in call.items() if k in planned)


def unsupported(kind: str, args: Sequence) -> str | None:
    """Why the kernel contract does not cover this call, or None (then a kernel may run)."""
    tensors = [t for t in args if isinstance(t, torch.Tensor)]
    x = tensors[0]
    if x.dtype not in DTYPES:
        return f"dtype {str(x.dtype).removeprefix('torch.')}"
    if any(t.device != x.device for t in tensors):
        return "tensors on several devices"
    if x.device.type != "cuda" and not (x.device.type == "cpu" and interpreter_on()):
        return f"device {x.device.type} (Triton needs CUDA or TRITON_INTERPRET=1)"
    if kind == "cross_entropy":
        return None if x.dim() == 2 and args[1].dim() == 1 else "not (N, V) logits"
    if any(t.dtype != x.dtype for t in tensors[1:]):
        return "mixed dtypes"
    if x.dim() == 0 or x.shape[-1] == 0:
        return "empty last dim"
    if kind == "matmul" and (x.dim() != 2 or args[1].dim() != 2 or x.shape[1] != args[1].shape[0]):
        return "not (M, K) @ (K, N)"
    if kind == "flash_attention":
        q, k, v = tensors
        if q.dim() != 4 or k.shape != v.shape or k.shape[-1] != q.shape[-1]:
            return "not (B, H, S, D) with matching K/V"
        if q.shape[1] % k.shape[1]:
            return "query heads not a multiple of key/value heads"
    if kind == "rotary_embedding" and (
        x.dim() != 4 or x.shape[-1] % 2 or args[1].numel() != x.shape[2] * x.shape[3]
    ):
        return "not (B, H, S, D) x with (S, D) cos/sin"
    return None


def _label(kind: str, size: Mapping[str, int]) -> str:
    return SPECS[kind].label(size)


@dataclass
class Router:
    """The kernels of one type that a Patch loaded, its routing policy and call counters."""

    kind: str
    kernels: list[LoadedKernel]
    policy: Policy = "dtype"
    calls: Counter = field(default_factory=Counter)  # kernel name -> calls run by it
    fallbacks: Counter = field(default_factory=Counter)  # reason -> calls run by PyTorch

    @property
    def kernel_calls(self) -> int:
        return sum(self.calls.values())

    def fallback(self, reason: str) -> None:
        """Count a call the patch saw but did not hand to the op (e.g. softmax over dim 0)."""
        self.fallbacks[reason] += 1

    def choose(self, args: Sequence) -> tuple[LoadedKernel | None, str]:
        reason = unsupported(self.kind, args)
        if reason:
            return None, reason
        size = call_size(self.kind, args)
        for k in self.kernels:
            if any(same_size(self.kind, size, s) for s in k.shapes):
                return k, ""
        if self.policy == "plan":
            return None, f"shape {_label(self.kind, size)} not in the plan"
        return self.kernels[0], ""

    def __call__(self, *args):
        kernel, reason = self.choose(args)
        with _inside_op():
            if kernel is None:
                self.fallbacks[reason] += 1
                return _REFERENCE[self.kind](*args)
            self.calls[kernel.name] += 1
            out = kernel.fn(*args)
        if any(_shares_storage(out, t) for t in args if isinstance(t, torch.Tensor)):
            out = out.clone()  # a custom op's output must not alias its inputs
        return out


def _shares_storage(a: torch.Tensor, b: torch.Tensor) -> bool:
    return a.untyped_storage().data_ptr() == b.untyped_storage().data_ptr()


_REFERENCE: dict[str, Callable] = {k: getattr(reference, k) for k in reference.KERNEL_TYPES}
_ROUTERS: dict[int, Router] = {}
_SLOTS = itertools.count(1)
_STATE = threading.local()


def register(router: Router) -> int:
    """Make the router reachable from the ops; the returned slot goes into every op call."""
    slot = next(_SLOTS)
    _ROUTERS[slot] = router
    return slot


def unregister(slot: int) -> None:
    _ROUTERS.pop(slot, None)


def in_op() -> bool:
    """True while an op runs a kernel or the reference: patched functions must pass through
    (reference.flash_attention itself calls torch.softmax)."""
    return getattr(_STATE, "depth", 0) > 0


@contextlib.contextmanager
def _inside_op() -> Iterator[None]:
    _STATE.depth = getattr(_STATE, "depth", 0) + 1
    try:
        yield
    finally:
        _STATE.depth -= 1


def _route(slot: int, *args):
    router = _ROUTERS.get(slot)
    if router is None:
        raise RuntimeError(f"autokernel op called with slot {slot}, but that patch was removed")
    return router(*args)


Tensor = torch.Tensor
op = torch.library.custom_op


@op(f"{NAMESPACE}::matmul", mutates_args=())
def matmul(A: Tensor, B: Tensor, slot: int) -> Tensor:
    return _route(slot, A, B)


@op(f"{NAMESPACE}::softmax", mutates_args=())
def softmax(x: Tensor, slot: int) -> Tensor:
    return _route(slot, x)


@op(f"{NAMESPACE}::layernorm", mutates_args=())
def layernorm(x: Tensor, weight: Tensor, bias: Tensor, eps: float, slot: int) -> Tensor:
    return _route(slot, x, weight, bias, eps)


@op(f"{NAMESPACE}::rmsnorm", mutates_args=())
def rmsnorm(x: Tensor, weight: Tensor, eps: float, slot: int) -> Tensor:
    return _route(slot, x, weight, eps)


@op(f"{NAMESPACE}::cross_entropy", mutates_args=())
def cross_entropy(logits: Tensor, targets: Tensor, slot: int) -> Tensor:
    return _route(slot, logits, targets)


@op(f"{NAMESPACE}::reduce", mutates_args=())
def reduce(x: Tensor, slot: int) -> Tensor:
    return _route(slot, x)


@op(f"{NAMESPACE}::flash_attention", mutates_args=())
def flash_attention(
    Q: Tensor, K: Tensor, V: Tensor, causal: bool, sm_scale: float | None, slot: int
) -> Tensor:
    return _route(slot, Q, K, V, causal, sm_scale)


@op(f"{NAMESPACE}::fused_mlp", mutates_args=())
def fused_mlp(x: Tensor, w_gate: Tensor, w_up: Tensor, w_down: Tensor, slot: int) -> Tensor:
    return _route(slot, x, w_gate, w_up, w_down)


@op(f"{NAMESPACE}::rotary_embedding", mutates_args=())
def rotary_embedding(x: Tensor, cos: Tensor, sin: Tensor, slot: int) -> Tensor:
    return _route(slot, x, cos, sin)


# Fake implementations: the reference's output shape and dtype, no data.
def _like(x: Tensor, *_args) -> Tensor:
    return torch.empty_like(x, memory_format=torch.contiguous_format)


matmul.register_fake(lambda A, B, slot: A.new_empty((A.shape[0], B.shape[1])))
softmax.register_fake(_like)
layernorm.register_fake(_like)
rmsnorm.register_fake(_like)
rotary_embedding.register_fake(_like)
reduce.register_fake(lambda x, slot: x.new_empty(x.shape[:-1]))
fused_mlp.register_fake(lambda x, wg, wu, wd, slot: x.new_empty((*x.shape[:-1], wd.shape[0])))
flash_attention.register_fake(
    lambda Q, K, V, causal, sm_scale, slot: Q.new_empty((*Q.shape[:-1], V.shape[-1]))
)
cross_entropy.register_fake(
    lambda logits, targets, slot: logits.new_empty(
        (), dtype=torch.float64 if logits.dtype == torch.float64 else torch.float32
    )
)

OPS: dict[str, Callable] = {
    "matmul": matmul,
    "flash_attention": flash_attention,
    "fused_mlp": fused_mlp,
    "softmax": softmax,
    "layernorm": layernorm,
    "rmsnorm": rmsnorm,
    "cross_entropy": cross_entropy,
    "rotary_embedding": rotary_embedding,
    "reduce": reduce,
}

assert set(OPS) == set(SPECS), "one op per kernel type"
