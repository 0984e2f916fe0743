"""The spec of a generic target: one region of a model (autokernel.specs.region) as a kernel type.

Its reference is the region replayed in float64 from the same low-precision inputs, its eager
baseline the region as the model runs it, and its sizes the model's symbol values plus perturbed
ones (each symbol one up, one down, odd, halved, doubled), so a kernel that only works at the
model's shape fails the sweep. A perturbed size is kept only if the region still replays there
(a reshape may need a multiple): the judge and the candidate's process compute the same list.
The stages sweep the region's own dtype, the one the model ran it in: the traced code (and the
starter Inductor made of it) is specialized to it.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Mapping

import torch

from autokernel.specs.base import Adversarial, KernelSpec, Size, SizeSet
from autokernel.specs.region import Region

GENERIC = "generic"
CPU_MAX_ELEMENTS = 1 << 14  # per input under the interpreter, which runs programs one by one
GPU_MAX_ELEMENTS = 1 << 28  # per input on a GPU: 512 MB of bf16
ADVERSARIAL_SCALE = 20.0  # inputs this many times the model's spread: exp, tanh and pow saturate


def _elements(region: Region, values: Mapping[str, int]) -> int:
    most = 1
    for k in range(len(region.inputs)):
        sizes, _ = region.shape_of(k, values)
        most = max(most, math.prod(sizes))
    return most


def _shrunk(region: Region, values: dict[str, int], limit: int) -> dict[str, int]:
    """Halve the largest symbol until every input fits `limit` elements (sizes stay >= 2)."""
    values = dict(values)
    while _elements(region, values) > limit:
        name = max(values, key=lambda k: values[k])
        if values[name] <= 2:
            break
        values[name] = max(2, values[name] // 2 + 1)
    return values


def _replays(region: Region, values: Mapping[str, int]) -> bool:
    try:
        region.outputs_of(region.meta_inputs(values))
    except Exception:  # a size the model's ops reject (a view that needs a multiple)
        return False
    return True


def _variants(region: Region, base: dict[str, int]) -> list[dict[str, int]]:
    moves = (
        lambda v: v + 1,
        lambda v: max(2, v - 1),
        lambda v: v | 1 if v % 2 == 0 else v + 2,  # odd: tails and masks
        lambda v: max(2, v // 2 + 1),
        lambda v: 2 * v - 1,
    )
    out = [base]
    for move in moves:
        out.append({k: move(v) for k, v in base.items()})
    for name in base:  # one symbol at a time: catches a kernel that mixes two dims up
        out.append({**base, name: base[name] + 3})
    return out


def _unique(region: Region, sizes: list[dict[str, int]], limit: int) -> tuple[Size, ...]:
    seen, out = set(), []
    for s in sizes:
        s = _shrunk(region, s, limit)
        key = tuple(sorted(s.items()))
        if key not in seen and _replays(region, s):
            seen.add(key)
            out.append(s)
    return tuple(out)


def _size_sets(region: Region, limit: int) -> SizeSet:
    base = _shrunk(region, dict(region.symbols), limit)
    variants = _unique(region, _variants(region, base), limit)
    odd = tuple(s for s in variants if any(v % 2 for v in s.values()) and s != base)
    return SizeSet(smoke=base, sweep=variants[:8], odd=odd[:3] or variants[-1:], bench=(base,))


def _storage(sizes: list[int], strides: list[int]) -> int:
    if any(n == 0 for n in sizes):
        return 0
    return 1 + sum((n - 1) * abs(st) for n, st in zip(sizes, strides, strict=True))


def _make(region: Region, scale: float):
    """Inputs of the traced layout: a filled storage viewed with the region's strides (broadcast
    inputs with stride 0 included), drawn like the model's: floats keep their sign (a sqrt's
    argument stays >= 0), integers stay inside the range the model used."""
    main = region.dtype

    def make(size: Size, dtype: torch.dtype, gen: torch.Generator, device: torch.device):
        out = []
        shrink = _shrink(region, size)
        for k, spec in enumerate(region.inputs):
            sizes, strides = region.shape_of(k, size)
            n = _storage(sizes, strides)
            want = dtype if spec.torch_dtype == main else spec.torch_dtype
            if want.is_floating_point:
                flat = torch.randn(n, generator=gen, dtype=torch.float32, device=gen.device)
                flat = flat * (spec.std or 1.0) * scale
                if spec.lo >= 0:
                    flat = flat.abs()
            elif want == torch.bool:
                flat = torch.rand(n, generator=gen, device=gen.device) < 0.5
            else:
                lo, hi = int(spec.lo), int(spec.hi)
                if shrink < 1.0 and hi > 0:  # indices: within the shrunk dim they index
                    hi = min(hi, max(lo, math.floor((hi + 1) * shrink) - 1))
                flat = torch.randint(lo, hi + 1, (n,), generator=gen, device=gen.device)
            flat = flat.to(device=device, dtype=want)
            out.append(torch.as_strided(flat, sizes, strides))
        return tuple(out)

    return make


def _shrink(region: Region, size: Size) -> float:
    """How far the smallest symbol of `size` shrank from the model's value (1: none did).
    Integer inputs are mostly indices (gather, index_select, embedding) drawn from the range
    the model used: past a dim cut to a perturbed or interpreter size they fail in the
    reference replay (index 22 of a dim of 21), where the kernel is not to blame."""
    ratios = [size[k] / v for k, v in region.symbols.items() if k in size and v > 0]
    return min([1.0, *ratios])


def _bytes(region: Region, size: Size, dtype: torch.dtype) -> float:
    total = 0
    for k, spec in enumerate(region.inputs):
        sizes, _ = region.shape_of(k, size)
        itemsize = dtype.itemsize if spec.torch_dtype == region.dtype else spec.torch_dtype.itemsize
        total += math.prod(sizes) * itemsize
    outs = region.outputs_of(region.meta_inputs(size))
    return float(total + sum(o.numel() * o.element_size() for o in outs))


def _eager(region: Region):
    """The region as the model runs it, as a graph (one per device), so torch.compile of it
    (the compile baseline) traces aten ops, not the replay's Python."""
    graphs: dict[str, torch.fx.GraphModule] = {}

    def eager(*xs: torch.Tensor) -> torch.Tensor:
        key = str(xs[0].device)
        if key not in graphs:
            graphs[key] = region.graph_module(xs[0].device)
        return graphs[key](*xs)

    return eager


@functools.lru_cache(maxsize=64)
def _cached(text: str) -> KernelSpec:
    import json

    return _build(Region.from_dict(json.loads(text)))


def generic_spec(description: Mapping) -> KernelSpec:
    """The spec of the region a plan or request describes (checked; RegionError if not)."""
    import json

    return _cached(json.dumps(description, sort_keys=True, default=str))


def _build(region: Region) -> KernelSpec:
    dims = tuple(region.symbols)
    main = region.dtype
    outs = region.outputs_of(region.meta_inputs())
    out = outs[0].dtype
    compute = sum(1 for n in region.nodes if str(n["op"]).startswith("aten."))
    gpu, cpu = _size_sets(region, GPU_MAX_ELEMENTS), _size_sets(region, CPU_MAX_ELEMENTS)
    scaled = Adversarial(
        "scaled_inputs", _make(region, ADVERSARIAL_SCALE),
        f"inputs {ADVERSARIAL_SCALE:g}x the model's spread: saturating exp, tanh and powers",
        gpu.smoke, cpu.smoke, dtypes=(main,),
    )  # fmt: skip
    return KernelSpec(
        name=GENERIC,
        arg_names=tuple(f"x{k}" for k in range(len(region.inputs))),
        dims=dims,
        make_inputs=_make(region, 1.0),
        flops=lambda s: float(
            compute * max(o.numel() for o in region.outputs_of(region.meta_inputs(s)))
        ),
        bytes_moved=lambda s, d: _bytes(region, s, d),
        bound="memory",
        gpu=gpu,
        cpu=cpu,
        adversarial=(scaled,),
        reference=lambda *xs: region.replay(xs, upcast=True),
        eager=_eager(region),
        out_dtype=(lambda d: d) if out == main else (lambda d: out),
        bench_dtype_gpu=main,
        bench_dtype_cpu=main,
        dtypes=(main,),
        variant=region.digest(),
    )
