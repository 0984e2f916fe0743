"""Put the custom ops into a model: module forwards replaced, functions swapped while active.

Modules (their `forward` is overridden on the instance, so parameters and state_dict stay as
they are and removing the patch restores the class's forward):
  nn.LayerNorm -> layernorm; a class named *RMSNorm* with `weight` and `eps`/`variance_epsilon`
  -> rmsnorm; a module with Linear children gate_proj, up_proj, down_proj -> fused_mlp (its
  Linears are then left alone); nn.Linear -> matmul on (rows, K) @ weight.t(), bias added after.
Functions (swapped on torch, torch.nn.functional and the model's own module globals):
  F.scaled_dot_product_attention -> flash_attention (no mask, no dropout; GQA via enable_gqa),
  F.softmax / torch.softmax over the last dim -> softmax, F.cross_entropy (mean, ignore_index
  -100, no weights or smoothing) -> cross_entropy, torch.sum(x, dim=-1) -> reduce, and a module
  level `apply_rotary` / `apply_rotary_pos_emb` of the model's modules -> rotary_embedding.
`x.sum(-1)` and `x.softmax(-1)` are Tensor methods: patching torch.Tensor would reroute every
library's sums, so they are not patched. Duck-typed matches (RMSNorm, SwiGLU, rotary) are
probed on a tiny input against the reference first; a module computing something else (Gemma's
1 + weight, a GELU MLP) is left alone with a note. A call outside a kernel's contract runs
PyTorch and is counted as a fallback with its reason.
"""

from __future__ import annotations

import contextlib
import types
from collections import Counter
from collections.abc import Callable, Iterator, Sequence

import torch
from torch import nn

from autokernel import kernel_ops, reference
from autokernel.kernel_ops import LoadedKernel, Policy, Router
from autokernel.patch_functions import FUNCTIONS, ROTARY_NAMES, WRAPPERS, n_required, rotary_wrapper

PROBE_TOL = {torch.float32: 1e-4, torch.float64: 1e-9}  # else 2e-2 (half types)


class Patch:
    """Loaded kernels, one Router per type, and what was found in the models patched."""

    def __init__(self, kernels: Sequence[LoadedKernel], policy: Policy = "dtype") -> None:
        self.routers: dict[str, Router] = {}
        for k in kernels:
            self.routers.setdefault(k.kernel_type, Router(k.kernel_type, [], policy))
            self.routers[k.kernel_type].kernels.append(k)
        self.slots = {kind: kernel_ops.register(r) for kind, r in self.routers.items()}
        self.sites: Counter = Counter()  # kind -> modules patched / function calls seen
        self.notes: list[str] = []
        self._installed: list[Callable[[], None]] = []
        self._active = False
        # One wrapper object per swapped function for the Patch's life: torch.compile guards on
        # the identity of the globals it traced, so a fresh wrapper per forward would recompile.
        self._wrappers: dict[tuple[str, int], Callable] = {}
        self._rotary: dict[int, tuple[str, Callable]] = {}  # probe verdict, wrapper

    def close(self) -> None:
        for slot in self.slots.values():
            kernel_ops.unregister(slot)

    def counts(self) -> dict[str, dict]:
        return {
            kind: {"kernel": r.kernel_calls, "fallback": sum(r.fallbacks.values()),
                   "by_kernel": dict(r.calls), "fallback_reasons": dict(r.fallbacks),
                   "sites": self.sites[kind]}
            for kind, r in self.routers.items()
        }  # fmt: skip

    def reset_counts(self) -> None:
        for r in self.routers.values():
            r.calls.clear()
            r.fallbacks.clear()

    @contextlib.contextmanager
    def applied(self, model: nn.Module) -> Iterator[nn.Module]:
        """Modules patched and functions swapped for the block (compile the model inside it)."""
        undo = self.patch_modules(model)
        try:
            with self.functions_active(model):
                yield model
        finally:
            undo()

    def install(self, model: nn.Module) -> Callable[[], None]:
        """Patch for good: modules now, functions only while the model's forward runs.
        Returns the function that removes it all."""
        undo = self.patch_modules(model)
        forward = model.forward

        def patched_forward(*args, **kwargs):
            with self.functions_active(model):
                return forward(*args, **kwargs)

        model.forward = patched_forward

        def remove() -> None:
            model.__dict__.pop("forward", None)
            undo()

        self._installed.append(remove)
        return remove

    def remove(self) -> None:
        """Undo every install and release the ops' slots."""
        while self._installed:
            self._installed.pop()()
        self.close()

    def patch_modules(self, model: nn.Module) -> Callable[[], None]:
        patched: list[nn.Module] = []
        claimed: set[int] = set()  # Linears inside a module patched as fused_mlp
        for name, m in model.named_modules():
            if id(m) in claimed:
                continue
            kind, why = self._match(m)
            if why:
                self.notes.append(f"{name or type(m).__name__}: left alone: {why}")
            if kind is None:
                continue
            m.forward = types.MethodType(_FORWARDS[kind](self.routers[kind], self.slots[kind]), m)
            patched.append(m)
            self.sites[kind] += 1
            if kind == "fused_mlp":
                claimed.update(id(c) for c in (m.gate_proj, m.up_proj, m.down_proj))

        def undo() -> None:
            for m in patched:
                m.__dict__.pop("forward", None)

        return undo

    def _match(self, m: nn.Module) -> tuple[str | None, str]:
        """(kind to patch it as, or None; a note why a likely candidate was left alone)."""
        has = self.routers.__contains__
        cls = type(m)
        if has("fused_mlp") and all(
            isinstance(getattr(m, n, None), nn.Linear)
            for n in ("gate_proj", "up_proj", "down_proj")
        ):
            why = _probe_mlp(m)
            return (None, why) if why else ("fused_mlp", "")
        if has("rmsnorm") and "RMSNorm" in cls.__name__:
            why = _probe_rmsnorm(m)
            return (None, why) if why else ("rmsnorm", "")
        if has("layernorm") and isinstance(m, nn.LayerNorm):
            if cls.forward is not nn.LayerNorm.forward:
                return None, "a LayerNorm subclass with its own forward"
            if len(m.normalized_shape) != 1 or m.weight is None or m.bias is None:
                return None, "LayerNorm not over one dim with weight and bias"
            return "layernorm", ""
        if has("matmul") and isinstance(m, nn.Linear):
            if cls.forward is not nn.Linear.forward:
                return None, "a Linear subclass with its own forward"
            return "matmul", ""
        return None, ""

    @contextlib.contextmanager
    def functions_active(self, model: nn.Module) -> Iterator[None]:
        if self._active:  # nested (install + applied): already swapped
            yield
            return
        import torch._dynamo  # noqa: F401  # before any swap: it records torch's functions once

        swaps: list[tuple[object, str, object]] = []  # (namespace, name, original)
        module_dicts = _model_globals(model)

        def swap(owner: object, name: str, new: object) -> None:
            if isinstance(owner, dict):
                swaps.append((owner, name, owner[name]))
                owner[name] = new
            else:
                swaps.append((owner, name, getattr(owner, name)))
                setattr(owner, name, new)

        for kind, places in FUNCTIONS.items():
            if kind not in self.routers:
                continue
            for owner, name in places:
                original = getattr(owner, name)
                wkey = (kind, id(original))
                if wkey not in self._wrappers:
                    self._wrappers[wkey] = WRAPPERS[kind](original, self, kind)
                new = self._wrappers[wkey]
                swap(owner, name, new)
                for d in module_dicts:
                    for key, value in list(d.items()):
                        if value is original:
                            swap(d, key, new)
        if "rotary_embedding" in self.routers:
            for d in module_dicts:
                for key in ROTARY_NAMES:
                    fn = d.get(key)
                    if isinstance(fn, types.FunctionType):
                        if id(fn) not in self._rotary:
                            self._rotary[id(fn)] = (_probe_rotary(fn), rotary_wrapper(fn, self))
                        why, wrapper = self._rotary[id(fn)]
                        if why:
                            self.notes.append(f"{key}: left alone: {why}")
                        else:
                            swap(d, key, wrapper)
        self._active = True
        try:
            yield
        finally:
            self._active = False
            for owner, name, original in reversed(swaps):
                if isinstance(owner, dict):
                    owner[name] = original
                else:
                    setattr(owner, name, original)

    def seen(self, kind: str) -> Router:
        """The router of a call a wrapper saw, counted as a site outside torch.compile only.

        Why: Dynamo guards on a counter it reads, so counting inside a traced forward made
        every call fail its guard and recompile (the compile+patched forward measured
        hundreds of times slower than compile). Under compile the op itself still counts the
        calls its kernel ran (Router.__call__ runs at run time)."""
        if not torch.compiler.is_compiling():
            self.sites[kind] += 1
        return self.routers[kind]


def _model_globals(model: nn.Module) -> list[dict]:
    """The globals of the modules defining the model's classes (torch's own excluded: they call
    through torch.nn.functional, which is swapped itself)."""
    dicts: dict[int, dict] = {}
    for m in model.modules():
        fwd = type(m).forward
        g = getattr(fwd, "__globals__", None)
        if g is not None and not str(g.get("__name__", "")).startswith("torch"):
            dicts[id(g)] = g
    return list(dicts.values())


def _linear_forward(router: Router, slot: int) -> Callable:
    def forward(self: nn.Linear, x: torch.Tensor) -> torch.Tensor:
        if x.dim() == 0 or x.shape[-1] != self.in_features:
            router.fallback("input's last dim is not in_features")
            return nn.Linear.forward(self, x)
        out = kernel_ops.matmul(x.reshape(-1, self.in_features), self.weight.t(), slot)
        if self.bias is not None:
            out = out + self.bias
        return out.reshape(*x.shape[:-1], self.out_features)

    return forward


def _layernorm_forward(router: Router, slot: int) -> Callable:
    def forward(self: nn.LayerNorm, x: torch.Tensor) -> torch.Tensor:
        if x.shape[-1:] != tuple(self.normalized_shape):
            router.fallback("input's last dim is not normalized_shape")
            return nn.LayerNorm.forward(self, x)
        return kernel_ops.layernorm(x, self.weight, self.bias, float(self.eps), slot)

    return forward


def _rmsnorm_forward(router: Router, slot: int) -> Callable:
    def forward(self: nn.Module, x: torch.Tensor) -> torch.Tensor:
        return kernel_ops.rmsnorm(x, self.weight, _eps(self, x.dtype), slot)

    return forward


def _mlp_forward(router: Router, slot: int) -> Callable:
    def forward(self: nn.Module, x: torch.Tensor) -> torch.Tensor:
        w = (self.gate_proj.weight, self.up_proj.weight, self.down_proj.weight)
        return kernel_ops.fused_mlp(x, *w, slot)

    return forward


_FORWARDS = {
    "matmul": _linear_forward,
    "layernorm": _layernorm_forward,
    "rmsnorm": _rmsnorm_forward,
    "fused_mlp": _mlp_forward,
}


def _eps(m: nn.Module, dtype: torch.dtype) -> float:
    eps = getattr(m, "eps", getattr(m, "variance_epsilon", None))
    return float(torch.finfo(dtype).eps if eps is None else eps)  # nn.RMSNorm: eps=None


def _close(a: torch.Tensor, b: torch.Tensor) -> bool:
    tol = PROBE_TOL.get(a.dtype, 2e-2)
    return a.shape == b.shape and bool(((a.float() - b.float()).abs() <= tol * (1 + b.abs())).all())


def _probe(run: Callable[[], tuple[torch.Tensor, torch.Tensor]], what: str) -> str:
    """'' when the module/function computes what the op computes on a small random input."""
    try:
        with torch.no_grad(), kernel_ops._inside_op():  # the originals run unpatched
            got, want = run()
    except Exception as exc:  # any failure means: not the pattern we know
        return f"{what} probe raised {type(exc).__name__}: {exc}"
    return "" if _close(got, want) else f"does not compute {what} (probed on a small input)"


def _probe_rmsnorm(m: nn.Module) -> str:
    w = getattr(m, "weight", None)
    if not isinstance(w, torch.Tensor) or w.dim() != 1:
        return "RMSNorm-named module without a 1-D weight"
    if not any(hasattr(m, a) for a in ("eps", "variance_epsilon")):
        return "RMSNorm-named module without eps"
    x = torch.randn(3, w.shape[0], dtype=w.dtype, device=w.device)
    return _probe(
        lambda: (type(m).forward(m, x), reference.rmsnorm(x, w, _eps(m, x.dtype))), "rmsnorm"
    )


def _probe_mlp(m: nn.Module) -> str:
    g, u, d = m.gate_proj, m.up_proj, m.down_proj
    if any(lin.bias is not None for lin in (g, u, d)):
        return "SwiGLU MLP with biased Linears"
    x = torch.randn(2, g.in_features, dtype=g.weight.dtype, device=g.weight.device)
    want = lambda: reference.fused_mlp(x, g.weight, u.weight, d.weight)
    return _probe(lambda: (type(m).forward(m, x), want()), "a SwiGLU MLP")


def _probe_rotary(fn: Callable) -> str:
    """The x-only form fn(x, cos, sin) with (S, D) tables, or the two-tensor form
    fn(q, k, cos, sin, ...) -> (q, k) with (1, S, D) tables (Hugging Face's)."""
    gen = torch.Generator().manual_seed(0)
    x = torch.randn(1, 2, 3, 8, generator=gen)
    freqs = torch.randn(3, 4, generator=gen)
    cos, sin = torch.cat((freqs, freqs), -1).cos(), torch.cat((freqs, freqs), -1).sin()
    want = reference.rotary_embedding(x, cos, sin)
    if n_required(fn) >= 4:
        return _probe(lambda: (fn(x, x, cos[None], sin[None])[1], want), "rotary_embedding")
    return _probe(lambda: (fn(x, cos, sin), want), "rotary_embedding")
