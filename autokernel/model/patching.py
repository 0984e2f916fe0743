"""Put the custom ops into a model, at exactly the places profile claimed (one matcher).

Modules: their `forward` is overridden on the instance (parameters and state_dict stay as they
are; removing the patch restores the class's forward) where autokernel.model.matcher makes them
a kernel type: nn.Linear, nn.LayerNorm, a SwiGLU MLP (its Linears are then left alone), a
module computing RMSNorm; and where a generic target's route names the module.
Torch calls: a TorchFunctionMode, active while the forward runs, routes every call the matcher
claims: torch.softmax, F.softmax and x.softmax(-1) alike, sums over the last dim, attention,
losses, norms, 2-D products, and the generic targets' calls (a log-softmax, a tanh GELU).
The model's own functions: swapped in its modules' globals while the forward runs (a rotary
function, a generic region such as transformers' apply_rotary_pos_emb).
A call the matcher claims but the kernel's contract does not cover (dtype, device, a layout
the generic kernel was not traced for) runs PyTorch and is counted as a fallback with its
reason; a duck-typed module computing something else is left alone with a note.
"""

from __future__ import annotations

import contextlib
import types
import weakref
from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass

import torch
from torch import nn
from torch.overrides import TorchFunctionMode

from autokernel.model import callee_swap, kernel_ops
from autokernel.model import calls as callnames
from autokernel.model.generic_ops import GenericRoute
from autokernel.model.kernel_ops import LoadedKernel, Policy, Router
from autokernel.model.kinds import KINDS
from autokernel.model.match import Match
from autokernel.model.matcher import (
    DeclinedCalls,
    function_kinds,
    likely_kinds,
    match_call,
    match_function,
    match_module,
    module_kind,
    owned_modules,
)
from autokernel.specs import GENERIC

_OPS = (torch._ops.OpOverload, torch._ops.OpOverloadPacket)


class Patch:
    """Loaded kernels, one Router per type (one per target for generic kernels), and what was
    found in the models patched."""

    def __init__(self, kernels: Sequence[LoadedKernel], policy: Policy = "dtype") -> None:
        self.notes: list[str] = []  # before any claim: an unreachable callee adds one
        self.routers: dict[str, Router] = {}  # kernel type, or a generic target's name
        self.generic: dict[str, GenericRoute] = {}  # route key -> its kernel's route
        for k in kernels:
            key = k.name if k.kernel_type == GENERIC else k.kernel_type
            self.routers.setdefault(key, Router(k.kernel_type, [], policy))
            self.routers[key].kernels.append(k)
        self.slots = {key: kernel_ops.register(r) for key, r in self.routers.items()}
        for k in kernels:
            if k.kernel_type == GENERIC and k.region is not None and k.route:
                self.generic[k.route] = GenericRoute(k, self.routers[k.name], self.slots[k.name])
        self._heads = {callnames.route_head(r) for r in self.generic}
        self._expect = {r: callnames.Expectation(r) for r in self.generic}
        # Torch callees the router claims, by identity: a dict lookup keyed by the function
        # object is what torch.compile traces through (names would need string handling).
        self._callees: dict[Callable, tuple[str, list[str]]] = {}
        self._places: dict[callee_swap.Place, None] = {}  # where each callee is reached
        for kind in self.routers:
            for name in KINDS[kind].calls if kind in KINDS else ():
                self._claim_callee(name, None)
        for route in self.generic:
            head = callnames.route_head(route)
            if head.startswith("call:"):
                self._claim_callee(head.removeprefix("call:"), route)
        self.sites: Counter = Counter()  # kind -> modules patched / calls seen
        self._declined = DeclinedCalls(self.notes)  # why claimed callees' calls stayed torch's
        self._installed: list[Callable[[], None]] = []
        self._active = False
        # One wrapper per swapped function for the Patch's life: torch.compile guards on the
        # identity of the globals it traced, so a fresh wrapper per forward would recompile.
        self._wrappers: dict[int, Callable] = {}
        # Per model, what its forwards swap: scanning the model's modules' globals took
        # 0.2-0.7 ms (a 4-layer HF model, 2-core CPU), a cost every patched forward paid.
        self._swaps: weakref.WeakKeyDictionary[nn.Module, _ModelSwaps] = weakref.WeakKeyDictionary()

    def _claim_callee(self, name: str, route: str | None) -> None:
        func = callee_swap.original(callnames.resolve(name))
        places = callee_swap.places_of(name)
        if func is None or not places:
            if route is not None:
                self.notes.append(f"{name}: not reachable by name, left to PyTorch")
            return
        self._places.update(dict.fromkeys(places))
        entry = self._callees.setdefault(func, (name, []))
        if route is not None:
            entry[1].append(route)

    def close(self) -> None:
        for slot in self.slots.values():
            kernel_ops.unregister(slot)

    def counts(self) -> dict[str, dict]:
        return {
            key: {"kernel": r.kernel_calls, "fallback": sum(r.fallbacks.values()),
                  "by_kernel": dict(r.calls), "fallback_reasons": dict(r.fallbacks),
                  "sites": self.sites[key], "kernel_type": r.kind}
            for key, r in self.routers.items()
        }  # fmt: skip

    def reset_counts(self) -> None:
        for r in self.routers.values():
            r.calls.clear()
            r.fallbacks.clear()

    @contextlib.contextmanager
    def applied(self, model: nn.Module, traced: bool = True) -> Iterator[nn.Module]:
        """Modules patched, the model's functions swapped and torch calls routed for the
        block. traced (default): through a TorchFunctionMode, so a torch.compile of the model
        inside the block traces the routing; traced=False: by swapped callees, for a block
        that only runs the model eagerly (what verify checks, and what install does per
        eager forward), where the mode would tax every other torch call."""
        undo = self.patch_modules(model)
        try:
            with self.functions_active(model, traced=traced):
                yield model
        finally:
            undo()

    def install(self, model: nn.Module) -> Callable[[], None]:
        """Patch for good: modules now, calls and functions only while the model's forward
        runs. Returns the function that removes it all."""
        undo = self.patch_modules(model)
        forward, before = model.forward, model.__dict__.get("forward")
        swaps = self._swaps_of(model)  # found now, eagerly: Dynamo cannot trace the search

        def patched_forward(*args, **kwargs):
            # Decided per forward: swapped callees when it runs eagerly, the mode when Dynamo
            # traces it (torch.compile of the model, inside or after the patch). Dynamo is kept
            # out of the swapping itself: guards on module globals that a reload replaced
            # failed to build (a model file loaded twice in one process).
            if torch.compiler.is_compiling():
                with _CallRouter(self) if self._callees else contextlib.nullcontext():
                    return forward(*args, **kwargs)
            with self.functions_active(model, swaps=swaps):
                return forward(*args, **kwargs)

        model.forward = patched_forward

        def remove() -> None:
            if before is None:
                model.__dict__.pop("forward", None)
            else:  # the forward an outer install or wrapper had set
                model.forward = before
            undo()

        self._installed.append(remove)
        return remove

    @contextlib.contextmanager
    def installed(self, model: nn.Module) -> Iterator[nn.Module]:
        """`install` for the block: each forward decides how calls are routed (swapped callees
        eagerly, the TorchFunctionMode when Dynamo traces it), so an eager forward in the block
        pays nothing on the torch calls no kernel claims, and torch.compile inside it still
        traces the routing. `applied` would hold the mode for the whole block instead."""
        remove = self.install(model)
        try:
            yield model
        finally:
            remove()
            with contextlib.suppress(ValueError):
                self._installed.remove(remove)

    def remove(self) -> None:
        """Undo every install and release the ops' slots."""
        while self._installed:
            self._installed.pop()()
        self.close()

    # ---- modules ------------------------------------------------------------------------------

    def patch_modules(self, model: nn.Module) -> Callable[[], None]:
        patched: list[nn.Module] = []
        claimed: set[int] = set()  # Linears inside a module patched as fused_mlp
        for path, m in model.named_modules():
            if id(m) in claimed:
                continue
            forward = self._module_forward(path, m)
            if forward is None:
                continue
            m.forward = types.MethodType(forward, m)
            patched.append(m)
            claimed.update(id(c) for c in owned_modules(m))

        def undo() -> None:
            for m in patched:
                m.__dict__.pop("forward", None)

        return undo

    def _module_forward(self, path: str, m: nn.Module) -> Callable | None:
        kind, why = module_kind(m)
        if why and (kind in self.routers or _likely(m, self.routers)):
            self.notes.append(f"{path or type(m).__name__}: left alone: {why}")
        if kind is not None and kind in self.routers:
            self.sites[kind] += 1
            return self._typed_forward(kind, type(m).forward)
        head = callnames.route_head(callnames.module_route(m, path, (), {}))
        if head in self._heads:
            return self._generic_forward(head, type(m).forward)
        return None

    def _typed_forward(self, kind: str, original: Callable) -> Callable:
        router = self.routers[kind]

        def forward(module: nn.Module, *args, **kwargs):
            if kernel_ops.in_op():
                return original(module, *args, **kwargs)
            match = match_module(module, args, kwargs, kind)
            if match is None or match.kind != kind:
                router.fallback("this call is not the module's kernel type")
                return original(module, *args, **kwargs)
            return self._run(match)

        return forward

    def _generic_forward(self, head: str, original: Callable) -> Callable:
        routes = [r for r in self.generic if callnames.route_head(r) == head]

        def forward(module: nn.Module, *args, **kwargs):
            if kernel_ops.in_op():
                return original(module, *args, **kwargs)
            route = self._generic_route(routes, args, kwargs)
            if route is None:
                return original(module, *args, **kwargs)
            tensors = callnames.tensors_of(args, kwargs) + callnames.module_tensors(module)
            return route.run(tensors)

        return forward

    def _generic_route(self, routes: list[str], args: tuple, kwargs: dict) -> GenericRoute | None:
        for r in routes:
            if self._expect[r].matches(args, kwargs):
                route = self.generic[r]
                self._count(route.kernel.name)
                return route
        return None

    def _count(self, key: str) -> None:
        """Count a call a wrapper routed, outside torch.compile only.

        Why: Dynamo guards on a counter it reads, so counting inside a traced forward made
        every call fail its guard and recompile (the compile+patched forward measured
        hundreds of times slower than compile). Under compile the op itself still counts the
        calls its kernel ran (Router.__call__ runs at run time)."""
        if not torch.compiler.is_compiling():
            self.sites[key] += 1

    def _run(self, match: Match) -> object:
        op, slot = kernel_ops.OPS[match.kind], self.slots[match.kind]
        return match.finish([op(*args, slot) for args in match.calls])

    # ---- calls and functions ------------------------------------------------------------------

    @contextlib.contextmanager
    def functions_active(
        self, model: nn.Module, traced: bool | None = None, swaps: _ModelSwaps | None = None
    ) -> Iterator[None]:
        """The model's functions swapped and the claimed torch calls routed for the block.
        `traced`: torch.compile will trace the forward (default: whether it is tracing now);
        then a TorchFunctionMode routes the calls, which Dynamo traces once. In an eager
        forward the callees' attributes are swapped instead (autokernel.model.callee_swap),
        so the forward's other torch calls cost what they cost unpatched."""
        if self._active:  # nested (install + applied): already active
            yield
            return
        if traced is None:
            traced = torch.compiler.is_compiling()
        swaps = swaps or self._swaps_of(model)
        for entry, wrapper in swaps.functions:
            entry.swap(wrapper)
        if not self._callees:
            calls: contextlib.AbstractContextManager = contextlib.nullcontext()
        elif traced:
            calls = _CallRouter(self)
        else:
            calls = callee_swap.routed(swaps.places, self.call)
        self._active = True
        try:
            with calls:
                yield
        finally:
            self._active = False
            for entry, _ in reversed(swaps.functions):
                entry.restore()

    def _swaps_of(self, model: nn.Module) -> _ModelSwaps:
        swaps = self._swaps.get(model)
        if swaps is None:
            swaps = self._swaps[model] = self._model_swaps(model)
        return swaps

    def _model_swaps(self, model: nn.Module) -> _ModelSwaps:
        functions = []
        for entry in callnames.model_functions(model):
            wrapper = self._function_wrapper(entry)
            if wrapper is not None:
                functions.append((entry, wrapper))
        places = list(self._places)
        # Names the model's modules bound to a claimed callee (`from torch.nn.functional
        # import scaled_dot_product_attention`) are swapped too.
        # So are a module's own attributes holding one: transformers' GELUActivation keeps
        # `self.act = nn.functional.gelu` and calls self.act(x), which no swap of
        # torch.nn.functional reaches.
        holders = [*callnames.model_globals(model), *(vars(m) for m in model.modules())]
        for g in holders:
            places += [(g, n, None) for n, v in list(g.items()) if self._claims(v)]
        return _ModelSwaps(functions, places)

    def _claims(self, value: object) -> bool:
        """Whether `value` is (a wrapper of) a callee the router claims."""
        if not callable(value) or isinstance(value, nn.Module | type):
            return False
        try:
            return callee_swap.original(value) in self._callees
        except TypeError:  # an unhashable callable object
            return False

    def _function_wrapper(self, entry: callnames.ModelFunction) -> Callable | None:
        fn, run = entry.function, entry.value
        typed = bool(function_kinds(fn) & set(self.routers))
        head = f"function:{fn.__module__}.{fn.__qualname__}"
        routes = [r for r in self.generic if callnames.route_head(r) == head]
        if not typed and not routes:
            return None
        if id(run) in self._wrappers:
            return self._wrappers[id(run)]

        def wrapper(*args, **kwargs):
            if kernel_ops.in_op():
                return run(*args, **kwargs)
            if typed:
                match = match_function(fn, args, kwargs)
                if match is not None and match.kind in self.routers:
                    self._count(match.kind)
                    return self._run(match)
            route = self._generic_route(routes, args, kwargs)
            if route is not None:
                return route.run(callnames.tensors_of(args, kwargs))
            return run(*args, **kwargs)

        self._wrappers[id(run)] = wrapper
        return wrapper

    def call(self, func: Callable, args: tuple, kwargs: dict) -> object:
        """One torch call under the router: a claimed one runs its op, the rest as written."""
        entry = self._callees.get(func)
        if entry is None:
            return func(*args, **kwargs)
        name, routes = entry
        match = match_call(func, args, kwargs, name)
        if match is not None and match.kind in self.routers:
            self._count(match.kind)
            return self._run(match)
        if match is None and not torch.compiler.is_compiling():  # as _count: no traced state
            self._declined.note(name, func, args, kwargs)
        route = self._generic_route(routes, args, kwargs) if routes else None
        if route is not None:
            return route.run(callnames.tensors_of(args, kwargs))
        return func(*args, **kwargs)


@dataclass
class _ModelSwaps:
    functions: list[tuple[callnames.ModelFunction, Callable]]
    places: list[callee_swap.Place]


class _CallRouter(TorchFunctionMode):
    def __init__(self, patch: Patch) -> None:
        super().__init__()
        self.patch = patch

    def __torch_function__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        if kernel_ops.in_op() or isinstance(func, _OPS):
            return func(*args, **kwargs)
        return self.patch.call(func, args, kwargs)


def _likely(m: nn.Module, routers: dict) -> bool:
    """A module that looks like a loaded type by its name or parts (notes are kept for those)."""
    return bool(likely_kinds(m) & set(routers))
