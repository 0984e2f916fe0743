"""Inductor's own code for a region: the Python wrapper and Triton kernels torch.compile writes.

The region's graph (Region.graph_module) is compiled with dynamic shapes and duck sizing off, as
it was traced, and the wrapper module Inductor generates is taken as text right after code
generation, before Inductor compiles or loads anything: nothing is run, so this works where the
kernels could not be compiled. The one exception is the model's own shape on a GPU, compiled and
run once so that Inductor's autotuner names the block sizes it would launch there.

On a GPU that is the code torch.compile runs. Without one, Inductor's Triton backend for CPU
tensors (torch._inductor.config.cpu_backend = "triton") writes the same kind of kernels; it only
needs a Triton driver for a hash that names its cache entries, which the CPU build of Triton
does not have, so that one hash is replaced for the duration of the generation. The kernels are
then run by Triton's interpreter like every kernel on a CPU (autokernel.model.starter).
"""

from __future__ import annotations

import contextlib
import logging
import re
import warnings
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from unittest import mock

import torch

from autokernel.model.capture import mark_sizes_dynamic
from autokernel.specs.region import Region

_DYNAMO_ARG = re.compile(r"l_x(\d+)_")  # dynamo's placeholder for graph_module input x<k>


class InductorCodeError(Exception):
    """Inductor produced no usable code for the region; the message says why."""


@dataclass(frozen=True)
class ArgSource:
    """Where the wrapper's i-th argument comes from in kernel_fn(x0, x1, ...)."""

    kind: str  # "tensor", "size" or "stride"
    input: int
    dim: int = 0


@dataclass(frozen=True)
class InductorCode:
    wrapper: str  # the generated Python module, as text
    args: tuple[ArgSource, ...]  # the wrapper's call(args), in order
    # kernel name -> the launch parameters Inductor's autotuner kept for it at the model's
    # shape (XBLOCK, R0_BLOCK, num_warps, ...); empty where nothing was run
    chosen: dict[str, dict[str, int]] = field(default_factory=dict)


class _Generated(Exception):
    """Raised from inside Inductor once the wrapper text is in hand: stop before compiling."""


def generate(region: Region, device: torch.device, dynamic: bool = True) -> InductorCode:
    """Inductor's wrapper for the region on `device`, with its arguments' sources. dynamic:
    every size a symbol (kernels for any shape); else the model's own sizes and strides as
    constants, the code torch.compile runs at that shape (fused and persistent where sizes
    known at compile time allow it)."""
    import torch._dynamo
    import torch._inductor.config as inductor_config
    import torch.fx.experimental._config as fx_config
    from torch._inductor.compile_fx import compile_fx
    from torch._inductor.graph import GraphLowering

    gm = region.graph_module(device)
    tensors = _example_inputs(region, device)
    if dynamic:
        mark_sizes_dynamic(tensors)
    found: dict[str, object] = {}
    # At the model's shape on a GPU the code is compiled and run once, as torch.compile would,
    # so that its autotuner picks each kernel's blocks among Inductor's candidates: for a
    # reduction whose hint is DEFAULT the candidates differ tenfold in speed (an outer sum
    # run with inner-reduction blocks).
    run = not dynamic and device.type == "cuda"
    original = GraphLowering.compile_to_module

    def grab(self: GraphLowering) -> object:
        if run:
            module = original(self)
            found["wrapper"] = Path(module.__file__).read_text()
            found["module"] = module
            return module
        wrapper = self.codegen()[0]  # (wrapper, kernels) now, (code, line map) before 2.6
        found["wrapper"] = getattr(wrapper, "value", wrapper)
        raise _Generated

    def backend(graph: torch.fx.GraphModule, example_inputs: list):
        found["args"] = _sources(graph)
        return compile_fx(graph, example_inputs)

    settings = {
        "force_disable_caches": True,  # a cache hit would skip code generation
        "combo_kernels": False,  # one launch per kernel, each with its own grid
        "triton.cudagraphs": False,
        "cpp_wrapper": False,
    }
    if device.type == "cpu":
        settings["cpu_backend"] = "triton"
    torch._dynamo.reset()
    try:
        with (
            _quiet_abort(),
            inductor_config.patch(settings),
            fx_config.patch(use_duck_shape=False),
            mock.patch.object(GraphLowering, "compile_to_module", grab),
            _hash_without_driver(),
            torch.no_grad(),
        ):
            torch.compile(gm, backend=backend, fullgraph=True)(*tensors)
    except Exception as exc:  # _Generated arrives wrapped in dynamo's and Inductor's errors
        if "wrapper" not in found:
            message = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
            raise InductorCodeError(
                f"Inductor failed: {type(exc).__name__}: {message}"[:400]
            ) from None
    finally:
        torch._dynamo.reset()
    if "wrapper" not in found or "args" not in found:
        raise InductorCodeError("Inductor generated no code for the region")
    wrapper = str(found["wrapper"])
    chosen = _chosen(found["module"], wrapper) if "module" in found else {}
    return InductorCode(wrapper, tuple(found["args"]), chosen)  # type: ignore[arg-type]


_KERNEL_NAME = re.compile(r"async_compile\.triton\(\s*['\"](\w+)['\"]")


def kernel_names(wrapper: str) -> list[str]:
    """The Triton kernels a wrapper defines, in its order."""
    return list(dict.fromkeys(_KERNEL_NAME.findall(wrapper)))


def _chosen(module: object, wrapper: str) -> dict[str, dict[str, int]]:
    """Each kernel's one remaining launcher's parameters after a run: Inductor's autotuner
    keeps the fastest (or the only) config. A kernel in any other state is left out."""
    out = {}
    for name in kernel_names(wrapper):
        launchers = getattr(getattr(module, name, None), "launchers", None) or []
        config = getattr(launchers[0], "config", None) if len(launchers) == 1 else None
        kwargs = getattr(config, "kwargs", None)
        if isinstance(kwargs, dict):
            values = {k: v for k, v in kwargs.items() if isinstance(v, int)}
            out[name] = {**values, "num_warps": int(getattr(config, "num_warps", 4))}
    return out


def _example_inputs(region: Region, device: torch.device) -> list[torch.Tensor]:
    out = []
    for k, spec in enumerate(region.inputs):
        sizes, strides = region.shape_of(k, region.symbols)
        n = 1 + sum((s - 1) * abs(st) for s, st in zip(sizes, strides, strict=True))
        flat = torch.zeros(n if all(sizes) else 0, dtype=spec.torch_dtype, device=device)
        out.append(torch.as_strided(flat, sizes, strides))
    return out


def _sources(graph: torch.fx.GraphModule) -> list[ArgSource]:
    """Each graph input as a tensor input, or a size or stride of one (dynamo passes sizes as
    inputs of their own when shapes are dynamic), read from the graph's fake values."""
    placeholders = [n for n in graph.graph.nodes if n.op == "placeholder"]
    vals = [n.meta.get("example_value", n.meta.get("val")) for n in placeholders]
    tensors = {}
    for node, val in zip(placeholders, vals, strict=True):
        m = _DYNAMO_ARG.fullmatch(node.name)
        if isinstance(val, torch.Tensor) and m:
            tensors[int(m.group(1))] = val
    out = []
    for node, val in zip(placeholders, vals, strict=True):
        m = _DYNAMO_ARG.fullmatch(node.name)
        if isinstance(val, torch.Tensor):
            if m is None:
                raise InductorCodeError(f"the compiled graph reads {node.name}, not an input")
            out.append(ArgSource("tensor", int(m.group(1))))
        elif isinstance(val, torch.SymInt):
            out.append(_size_source(str(val.node.expr), tensors))
        else:
            raise InductorCodeError(f"graph input {node.name} is neither a tensor nor a size")
    return out


def _size_source(expr: str, tensors: dict[int, torch.Tensor]) -> ArgSource:
    for kind in ("size", "stride"):
        for k, t in sorted(tensors.items()):
            seq = t.shape if kind == "size" else t.stride()
            for d, s in enumerate(seq):
                if isinstance(s, torch.SymInt) and str(s.node.expr) == expr:
                    return ArgSource(kind, k, d)
    raise InductorCodeError(f"size {expr} is no input's size or stride")


@contextlib.contextmanager
def _quiet_abort() -> Iterator[None]:
    """Stopping Inductor right after code generation is this module's doing, not an error:
    keep its 'on error, temporary cache dir kept' warning and the caches-off notice quiet."""
    logger = logging.getLogger("torch._inductor.utils")
    level = logger.level
    logger.setLevel(logging.ERROR)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", UserWarning)
            yield
    finally:
        logger.setLevel(level)


@contextlib.contextmanager
def _hash_without_driver() -> Iterator[None]:
    """Inductor names each kernel's cache entry with a hash of Triton and its active backend;
    a Triton without a GPU driver has no backend to hash. The hash only names cache entries,
    and caches are off here."""
    import torch.utils._triton as triton_utils

    try:
        triton_utils.triton_hash_with_backend()
        has_driver = True
    except Exception:  # no active driver: the CPU build of Triton
        has_driver = False
    if has_driver:
        yield
        return
    with mock.patch.object(triton_utils, "triton_hash_with_backend", lambda: "0" * 64):
        yield
