"""Eager patched forwards route the claimed torch calls by swapping their attributes: the
forward's other torch calls stay C calls (no TorchFunctionMode), other threads see torch as it
is, and everything is restored after."""

from __future__ import annotations

import threading

import torch
import torch.nn.functional as F
from torch import nn

from autokernel import reference
from autokernel.model import callee_swap
from autokernel.model.kernel_ops import LoadedKernel
from autokernel.model.patching import Patch


def test_claimed_calls_reach_the_router_and_the_rest_is_untouched():
    seen = []

    def router(callee, args, kwargs):
        seen.append(callee)
        return callee(*args, **kwargs)

    originals = (torch.softmax, torch.Tensor.softmax, torch.Tensor.view)
    places = [(torch, "softmax", None), (torch.Tensor, "softmax", None)]
    x = torch.randn(2, 3)
    with callee_swap.routed(places, router):
        torch.softmax(x, -1)
        x.softmax(-1)
        x.view(3, 2)
        assert torch.Tensor.view is originals[2]
    assert seen == [originals[0], originals[1]]
    assert (torch.softmax, torch.Tensor.softmax, torch.Tensor.view) == originals
    assert "softmax" not in vars(torch.Tensor)  # inherited before, inherited after


def test_operators_reach_the_router_as_the_method_profile_named():
    """A plan names `x + r` as call:Tensor.add (what a TorchFunctionMode sees); swapping
    Tensor.add alone would miss the operator."""
    seen = []

    def router(callee, args, kwargs):
        seen.append(callee)
        return callee(*args, **kwargs)

    x, r = torch.randn(2, 3), torch.randn(2, 3)
    before = (torch.Tensor.__add__, torch.Tensor.__radd__, torch.Tensor.add)
    with callee_swap.routed(callee_swap.places_of("Tensor.add"), router):
        got = (x + r, 2.0 + x, x.add(r))
    assert seen == [torch.Tensor.add] * 3
    torch.testing.assert_close(got[0], x.add(r))
    torch.testing.assert_close(got[1], x + 2.0)
    assert (torch.Tensor.__add__, torch.Tensor.__radd__, torch.Tensor.add) == before


def test_another_thread_sees_the_original_callee_while_one_forward_is_routed():
    routed_calls, other = [], []
    inside, done = threading.Event(), threading.Event()

    def router(callee, args, kwargs):
        routed_calls.append(1)
        return callee(*args, **kwargs)

    def other_thread():
        inside.wait(5)
        other.append(torch.softmax(torch.ones(2), -1))
        done.set()

    t = threading.Thread(target=other_thread)
    t.start()
    with callee_swap.routed([(torch, "softmax", None)], router):
        inside.set()
        done.wait(5)
        torch.softmax(torch.ones(2), -1)
    t.join()
    assert len(routed_calls) == 1 and len(other) == 1


def test_overlapping_forwards_restore_only_when_the_last_leaves():
    original = torch.softmax
    a = callee_swap.routed([(torch, "softmax", None)], lambda c, a, k: c(*a, **k))
    b = callee_swap.routed([(torch, "softmax", None)], lambda c, a, k: c(*a, **k))
    a.__enter__()
    b.__enter__()
    a.__exit__(None, None, None)
    assert torch.softmax is not original  # b still routes
    b.__exit__(None, None, None)
    assert torch.softmax is original


class _Net(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.modes: list[bool] = []

    def forward(self, x):
        self.modes.append(torch._C._is_torch_function_mode_enabled())
        return F.softmax(x.view(x.shape[0], -1) * 2, dim=-1)


def test_an_eager_patched_forward_runs_without_a_torch_function_mode():
    net = _Net()
    patch = Patch([LoadedKernel("softmax", "softmax", reference.softmax, None, [])])
    undo = patch.install(net)
    try:
        x = torch.randn(4, 8)
        with torch.no_grad():
            got = net(x)
        # the kernel ran, and the forward's own calls (view, mul, shape) met no mode
        assert patch.counts()["softmax"]["kernel"] == 1 and net.modes == [False]
        torch.testing.assert_close(got, torch.softmax(x * 2, -1))
    finally:
        undo()
        patch.close()
    assert F.softmax is callee_swap.original(F.softmax)


def test_the_model_is_scanned_for_its_functions_once_not_every_forward(monkeypatch):
    from autokernel.model import calls as callnames

    scans = []
    real = callnames.model_functions
    monkeypatch.setattr(callnames, "model_functions", lambda m: scans.append(m) or real(m))
    net = _Net()
    patch = Patch([LoadedKernel("softmax", "softmax", reference.softmax, None, [])])
    undo = patch.install(net)
    try:
        with torch.no_grad():
            for _ in range(3):
                net(torch.randn(2, 4))
    finally:
        undo()
        patch.close()
    assert len(scans) == 1 and patch.counts()["softmax"]["kernel"] == 3


def test_a_python_callee_reaches_the_router_as_a_mode_sees_it():
    """F.log_softmax(x, dim=0) reaches a TorchFunctionMode (profile, the plan's route) as
    (x,), {dim, _stacklevel, dtype}: the swapped callee must route that form, or a generic
    target planned from it never matches in an eager verify."""
    from torch.overrides import TorchFunctionMode

    class First(TorchFunctionMode):
        seen: tuple | None = None

        def __torch_function__(self, func, types, args=(), kwargs=None):
            if self.seen is None:
                self.seen = (tuple(args), dict(kwargs or {}))
            return func(*args, **(kwargs or {}))

    x = torch.randn(4, 5)
    mode = First()
    with mode:
        F.log_softmax(x, dim=0)
    seen = []

    def router(callee, args, kwargs):
        seen.append((callee, args, kwargs))
        return callee(*args, **kwargs)

    places = callee_swap.places_of("torch.nn.functional.log_softmax")
    with callee_swap.routed(places, router):
        got = F.log_softmax(x, dim=0)
    assert len(seen) == 1 and seen[0][0] is callee_swap.original(F.log_softmax)
    assert seen[0][1][0] is x and seen[0][2] == mode.seen[1]
    torch.testing.assert_close(got, torch.log_softmax(x, 0))


def test_a_boolean_dispatch_callee_is_named_and_routed_as_the_model_calls_it():
    """F.max_pool2d is torch's boolean_dispatch closure (qualname boolean_dispatch.<locals>.fn)
    and reaches a mode from _max_pool2d's hand-off: profile must name it so verify resolves it,
    and the swapped callee must route the form the mode sees."""
    from torch.overrides import TorchFunctionMode

    from autokernel.model.calls import api_name, resolve

    name = api_name(F.max_pool2d)
    assert name == "torch.nn.functional.max_pool2d" and resolve(name) is F.max_pool2d

    class First(TorchFunctionMode):
        seen: tuple | None = None

        def __torch_function__(self, func, types, args=(), kwargs=None):
            if self.seen is None:
                self.seen = (func, dict(kwargs or {}))
            return func(*args, **(kwargs or {}))

    x = torch.randn(1, 2, 8, 8)
    mode = First()
    with mode:
        F.max_pool2d(x, 2)
    seen = []

    def router(callee, args, kwargs):
        seen.append(kwargs)
        return callee(*args, **kwargs)

    with callee_swap.routed(callee_swap.places_of(name), router):
        got = F.max_pool2d(x, 2)
    assert mode.seen[0] is F.max_pool2d and seen == [mode.seen[1]]
    torch.testing.assert_close(got, F.max_pool2d(x, 2))


def test_a_generic_route_naming_an_unreachable_call_is_a_note_not_a_crash():
    from autokernel.model.capture import capture

    region = capture(lambda t: t.softmax(-1), [torch.randn(2, 4)], "fn")
    route = "call:torch.nn.functional.boolean_dispatch.<locals>.fn|()|[]"
    kernel = LoadedKernel("fn", "generic", reference.softmax, None, (), region, route)
    patch = Patch([kernel])
    try:
        assert any("not reachable by name" in n for n in patch.notes)
    finally:
        patch.close()


class _HeldCallee(nn.Module):
    """transformers' GELUActivation pattern: the torch function kept as an attribute."""

    def __init__(self) -> None:
        super().__init__()
        self.act = torch.softmax  # a C function: no Python inside it reaches a swapped name

    def forward(self, x):
        return self.act(x, -1)


def test_a_callee_a_module_holds_as_an_attribute_is_routed_and_restored():
    net = nn.Sequential(_HeldCallee())
    patch = Patch([LoadedKernel("softmax", "softmax", reference.softmax, None, [])])
    undo = patch.install(net)
    try:
        x = torch.randn(4, 8)
        with torch.no_grad():
            got = net(x)
        assert patch.counts()["softmax"]["kernel"] == 1
        torch.testing.assert_close(got, torch.softmax(x, -1))
    finally:
        undo()
        patch.close()
    assert net[0].act is torch.softmax
