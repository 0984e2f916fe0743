"""The ops' routing, decided once per call signature: a cached route must follow every change
that decides it (shape, dtype, the kernels loaded), count each call, and never hand out an
output that shares storage with an input."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from autokernel.model import kernel_ops
from autokernel.model.kernel_ops import LoadedKernel, Router


def _stub(name: str, fn, shapes=()) -> LoadedKernel:
    return LoadedKernel(name, "softmax", fn, Path(f"/nowhere/{name}.py"), tuple(shapes))


def _call(router: Router, x: torch.Tensor) -> torch.Tensor:
    slot = kernel_ops.register(router)
    try:
        return kernel_ops.softmax(x, slot)
    finally:
        kernel_ops.unregister(slot)


@pytest.mark.slow
def test_each_signature_gets_its_own_route_and_every_call_is_counted():
    planned = _stub("planned", lambda x: torch.full_like(x, 7.0), [{"rows": 4, "cols": 8}])
    router = Router("softmax", [planned], policy="plan")
    for _ in range(2):
        assert torch.equal(_call(router, torch.zeros(4, 8)), torch.full((4, 8), 7.0))
        other = torch.randn(4, 16)
        torch.testing.assert_close(_call(router, other), torch.softmax(other, -1))
        double = torch.randn(4, 8, dtype=torch.float64)  # same shape, a dtype no kernel takes
        torch.testing.assert_close(_call(router, double), torch.softmax(double, -1))
    assert router.calls == {"planned": 2}
    assert router.fallbacks == {"shape 4x16 not in the plan": 2, "dtype float64": 2}


def test_a_kernel_loaded_after_the_first_call_is_used():
    router = Router("softmax", [_stub("a", lambda x: x + 1, [{"rows": 2, "cols": 3}])], "plan")
    x = torch.zeros(5, 3)
    _call(router, x)
    assert router.fallbacks and not router.calls
    router.kernels.append(_stub("b", lambda x: x + 2, [{"rows": 5, "cols": 3}]))
    assert torch.equal(_call(router, x), x + 2)
    assert router.calls == {"b": 1}


def test_an_output_that_aliases_an_input_is_copied_on_every_call():
    router = Router("softmax", [_stub("same", lambda x: x[:, :])])  # a view of the input
    for _ in range(3):
        x = torch.randn(3, 4)
        out = _call(router, x)
        assert torch.equal(out, x)
        assert out.untyped_storage().data_ptr() != x.untyped_storage().data_ptr()
    assert router.calls == {"same": 3}


def test_the_op_marks_its_kernel_as_running_inside_it():
    seen = []
    router = Router("softmax", [_stub("probe", lambda x: seen.append(kernel_ops.in_op()) or x + 0)])
    _call(router, torch.ones(2, 2))
    assert seen == [True] and not kernel_ops.in_op()


@pytest.mark.slow
def test_an_eager_call_skips_the_dispatcher_and_a_tracer_gets_the_op():
    """Plain eager calls go straight to the Router (the dispatcher's round trip cost more host
    time than a launch); torch.compile must still see the op, or it would trace into Triton."""
    import torch

    from autokernel.model import kernel_ops

    router = kernel_ops.Router("softmax", [], policy="plan")  # no kernel: the reference runs
    slot = kernel_ops.register(router)
    op = kernel_ops.softmax.op
    try:
        x = torch.randn(4, 8)
        with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU]) as prof:
            out = kernel_ops.softmax(x, slot)
        dispatched = [e.name for e in prof.events() if e.name.startswith("autokernel::")]
        assert dispatched == [] and torch.allclose(out, torch.softmax(x, -1))
        assert router.fallbacks  # the call did reach the Router
        compiled = torch.compile(lambda t: kernel_ops.softmax(t, slot) * 2, backend="eager")
        explained = torch._dynamo.explain(lambda t: kernel_ops.softmax(t, slot) * 2)(x)
        assert explained.graph_break_count == 0
        assert any(n.target is op for g in explained.graphs for n in g.graph.nodes), (
            "the traced graph holds the custom op"
        )
        assert torch.allclose(compiled(x), 2 * torch.softmax(x, -1))
    finally:
        kernel_ops.unregister(slot)
