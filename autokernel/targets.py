"""What the loop optimizes: one target per kernel type and shape set, from a plan or a flag.

A target carries the model's real shapes (swept and benchmarked next to the spec's own sizes)
and its share of the model's GPU time, which the orchestrator turns into an Amdahl priority.
"""

from __future__ import annotations

import math
import re
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path

from autokernel.specs import GENERIC, KERNEL_TYPES, SPECS, KernelSpec, dtype_name, parse_dtype
from autokernel.specs import resolve as resolve_spec
from autokernel.specs.region import Region, RegionError

# A target's name becomes optimized/<name>.py and appears in commit messages.
TARGET_NAME = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.-]{0,99}")


class TargetError(ValueError):
    """A bad --kernel/--shape/--dtype or plan.yaml entry; the message says what to write."""


@dataclass(frozen=True)
class Target:
    name: str  # unique in a run: the kernel type, or type_N when a plan holds several
    kernel_type: str
    shapes: tuple[dict[str, int], ...] = ()  # real shapes; harness extra sizes
    dtype: str | None = None  # benchmark dtype; None: the spec's default for the device
    share: float = 1.0  # fraction of the model's GPU time this target accounts for
    calls: int = 1
    args: dict[str, object] = field(default_factory=dict)  # eps, causal, ... as the model uses
    model_ms: float | None = None  # per forward, all calls, in the profiled model (plan's ms)
    # The same target in torch.compile of the model (plan's compile_ms, compile_share); None in
    # plans written before profile measured compile: compile mode then falls back to eager's.
    compile_ms: float | None = None
    compile_share: float | None = None
    # A generic target: the traced region (its reference and inputs) and the route key that
    # finds the same call in the model again (autokernel.model.calls).
    region: dict | None = None
    route: str = ""

    def spec(self) -> KernelSpec:
        return resolve_spec(self.kernel_type, self.region)

    def model_speedup(self, kernel_us: float | None) -> float | None:
        """The model's own profiled time for this target over the kernel's at the same shape.
        That, not the speedup over reference.py's eager code, is what the model gains: a
        model's hand-written RMSNorm in fp32 ops can be ten times slower than the reference."""
        if self.model_ms and kernel_us and len(self.shapes) == 1:
            return self.model_ms * 1e3 / (self.calls * kernel_us)
        return None

    def mode_share(self, mode: str) -> float:
        """Fraction of the model's time in `mode` ("eager" or "compile") this target holds."""
        if mode == "compile" and self.compile_share is not None:
            return self.compile_share
        return self.share

    def mode_speedup(self, kernel_us: float | None, mode: str) -> float | None:
        """The kernel's speedup over this target's time in the model in `mode`, at the model's
        shape: model_speedup for eager, the compiled model's own time for compile."""
        if mode != "compile":
            return self.model_speedup(kernel_us)
        if self.compile_ms and kernel_us and len(self.shapes) == 1:
            return self.compile_ms * 1e3 / (self.calls * kernel_us)
        return None

    def harness_sizes(self) -> list[dict[str, int]]:
        """The real shapes as harness sizes; size-level arguments a spec reads from the size
        (attention's causal flag and mask form) come from the plan's args."""
        extra = {k: int(v) for k, v in self.args.items() if k in ("causal", "mask")}
        return [{**s, **extra} for s in self.shapes]

    def labels(self) -> set[str]:
        """How the harness labels the real shapes: the timings that decide keep or revert."""
        spec = self.spec()
        return {spec.label(s) for s in self.harness_sizes()}

    def to_json(self) -> dict:
        return {**asdict(self), "shapes": [dict(s) for s in self.shapes]}

    @classmethod
    def from_json(cls, data: dict) -> Target:
        return cls(**{**data, "shapes": tuple(dict(s) for s in data.get("shapes", ()))})


def parse_shape(kernel_type: str, text: str, spec: KernelSpec | None = None) -> dict[str, int]:
    """'4096x50257' (the spec's dims in order, optional leading ones left out) or
    'rows=4096,cols=50257'; name=value also sets a spec's options (attention's causal=0, mask=1),
    which change what is computed, so a night times the case the model runs."""
    spec = spec or resolve_spec(kernel_type)
    text = text.strip()
    try:
        if "=" in text:
            pairs = [p.split("=", 1) for p in re.split(r"[,\s]+", text) if p]
            size = {k.strip(): int(v) for k, v in pairs}
        else:
            values = [int(v) for v in re.split(r"[x×,\s]+", text) if v]
            required = [d for d in spec.dims if d in spec.cpu.bench[0]]
            names = spec.dims if len(values) == len(spec.dims) else required
            if len(values) != len(names):
                raise TargetError(
                    f"shape {text!r} for {kernel_type}: give {len(required)} numbers "
                    f"({'x'.join(required)}) or {len(spec.dims)} ({'x'.join(spec.dims)})"
                )
            size = dict(zip(names, values, strict=True))
    except ValueError as exc:
        if isinstance(exc, TargetError):
            raise
        raise TargetError(
            f"shape {text!r}: write it as {'x'.join(spec.dims)} numbers or name=value pairs"
        ) from None
    unknown = set(size) - set(spec.dims) - set(spec.options)
    if unknown:
        options = "".join(f", or {k}=" + "|".join(map(str, v)) for k, v in spec.options.items())
        raise TargetError(
            f"shape {text!r}: {kernel_type} has no dimension {', '.join(sorted(unknown))}; "
            f"its dimensions are {', '.join(spec.dims)}{options}"
        )
    for key, allowed in spec.options.items():
        if key in size and size[key] not in allowed:
            raise TargetError(
                f"shape {text!r}: {key} must be one of {', '.join(map(str, allowed))}"
            )
    if any(v <= 0 for k, v in size.items() if k not in spec.options):
        raise TargetError(f"shape {text!r}: every dimension must be positive")
    missing = [d for d in spec.dims if d in spec.cpu.bench[0] and d not in size]
    if missing:
        raise TargetError(f"shape {text!r}: {kernel_type} needs {', '.join(missing)} too")
    return size


def single(kernel_type: str, shapes: list[str] | None = None, dtype: str | None = None) -> Target:
    """The target of `autokernel run --kernel TYPE [--shape S ...] [--dtype D]`."""
    if kernel_type not in SPECS:
        raise TargetError(f"unknown kernel type {kernel_type!r}; choose one of {', '.join(SPECS)}")
    return Target(
        name=kernel_type,
        kernel_type=kernel_type,
        shapes=tuple(parse_shape(kernel_type, s) for s in shapes or ()),
        dtype=_dtype(dtype),
    )


def _dtype(name: str | None) -> str | None:
    if name is None:
        return None
    try:
        return dtype_name(parse_dtype(name))
    except ValueError as exc:
        raise TargetError(str(exc)) from None


def from_plan(path: Path) -> list[Target]:
    """Targets from plan.yaml (written by `autokernel profile`), in the plan's order.

    Expected: {"targets": [{"name", "kernel_type", "shapes": [{dim: int}] or ["AxB"],
    "dtype", "share", "calls", "args", "ms"}]}; only kernel_type is required."""
    import yaml

    try:
        data = yaml.safe_load(path.read_text())
    except (OSError, UnicodeDecodeError) as exc:
        raise TargetError(f"{path}: cannot read: {exc}") from None
    except yaml.YAMLError as exc:
        raise TargetError(f"{path}: not valid YAML: {' '.join(str(exc).split())}") from None
    entries = data.get("targets") if isinstance(data, dict) else None
    if not isinstance(entries, list) or not entries:
        raise TargetError(f"{path}: expected a 'targets:' list; run `autokernel profile` again")
    targets, seen = [], set()
    for i, entry in enumerate(entries):
        where = f"{path}: target {i + 1}"
        try:
            target = _plan_target(entry, len(entries))
        except TargetError as exc:
            raise TargetError(f"{where}: {exc}") from None
        if target.name in seen:  # two unnamed targets of one type: keep both, apart
            target = replace(target, name=f"{target.name[:90]}_{i}")
        seen.add(target.name)
        targets.append(target)
    return targets


def _plan_target(entry: object, count: int) -> Target:
    """One plan entry, every value checked: a bad one found here is a message, found later it
    stops the run when the target finishes (its name names a file) or at every resume."""
    if not isinstance(entry, dict):
        raise TargetError(f"expected a mapping with kernel_type, got {entry!r}")
    kind = entry.get("kernel_type")
    if kind not in KERNEL_TYPES:
        raise TargetError(f"kernel_type {kind!r} is not one of {', '.join(KERNEL_TYPES)}")
    region, route, spec = _generic(entry) if kind == GENERIC else (None, "", resolve_spec(kind))
    name = entry.get("name", kind)
    if not isinstance(name, str) or not TARGET_NAME.fullmatch(name):
        raise TargetError(
            f"name {name!r} cannot name the file optimized/<name>.py: use up to 100 letters, "
            "digits, '_', '-' or '.', not starting with '.' or '-'"
        )
    shapes = entry.get("shapes") or []
    if not isinstance(shapes, list):
        raise TargetError(f"shapes must be a list such as ['4096x50257'], not {shapes!r}")
    dtype = entry.get("dtype")
    if dtype is not None and not isinstance(dtype, str):
        raise TargetError(f"dtype must be a name such as bfloat16, not {dtype!r}")
    args = entry.get("args") or {}
    if not isinstance(args, dict) or not all(isinstance(k, str) for k in args):
        raise TargetError(f"args must be a mapping such as {{eps: 1.0e-6}}, not {args!r}")
    if args.get("causal", 0) not in (0, 1):  # True and False included: harness sizes take 0/1
        raise TargetError(f"args: causal must be true or false, not {args['causal']!r}")
    if args.get("mask", 0) not in (0, 1, 2):
        why = f"args: mask must be 0, 1 (padding) or 2 (additive), not {args['mask']!r}"
        raise TargetError(why)
    share = _number(entry, "share", 1.0 / count, upper=1.0)
    calls = _number(entry, "calls", 1)
    if calls != int(calls) or calls < 1:
        raise TargetError(f"calls must be a whole number of 1 or more, not {entry['calls']!r}")
    ms = _number(entry, "ms", None, zero_ok=True)  # 0: too short to time in the profile
    return Target(
        name=name,
        kernel_type=kind,
        shapes=tuple(
            parse_shape(kind, x, spec) if isinstance(x, str) else _checked(kind, x, spec)
            for x in shapes
        ),
        dtype=_dtype(dtype),
        share=share,
        calls=int(calls),
        args=args,
        model_ms=ms or None,
        compile_ms=_number(entry, "compile_ms", None, zero_ok=True),  # absent in older plans
        compile_share=_number(entry, "compile_share", None, upper=1.0, zero_ok=True),
        region=region,
        route=route,
    )


def _generic(entry: dict) -> tuple[dict, str, KernelSpec]:
    """A generic entry's region (checked: only aten ops and sizes) and route."""
    region, route = entry.get("region"), entry.get("route")
    if not isinstance(region, dict) or not isinstance(route, str) or not route:
        raise TargetError("a generic target needs its region and route; run `autokernel "
                          "profile` again to trace them")  # fmt: skip
    try:
        Region.from_dict(region)
        return region, route, resolve_spec(GENERIC, region)
    except RegionError as exc:
        raise TargetError(f"its region cannot be used: {exc}") from None


def _number(
    entry: dict, key: str, default: float | None, upper: float | None = None, zero_ok=False
) -> float | None:
    """A finite positive number from the plan (bools and text refused), or the default."""
    value = entry.get(key)
    if value is None:
        return default
    ok = isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)
    if not ok or value < 0 or (value == 0 and not zero_ok) or (upper and value > upper + 1e-9):
        least = "0 or more" if zero_ok else "above 0"
        limit = f" and at most {upper:g}" if upper else ""
        raise TargetError(f"{key} must be a number {least}{limit}, not {value!r}")
    return float(value)


def _checked(kind: str, shape: object, spec: KernelSpec) -> dict[str, int]:
    if not isinstance(shape, dict):
        raise TargetError(f"a {kind} shape must be a mapping or 'AxB' text, not {shape!r}")
    return parse_shape(kind, ",".join(f"{k}={v}" for k, v in shape.items()), spec)
