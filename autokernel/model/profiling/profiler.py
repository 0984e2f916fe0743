"""`autokernel profile`: where a model's time goes, as kernel targets with real shapes.

The model runs a few warm-up forwards outside the profiler (first-call allocations and
autotuning are not what a night of optimizing can win back), then `iters` forwards under
torch.profiler with shapes recorded. The time is attributed once per op (see attribution.py),
instances of the same kernel type, shape, dtype and arguments are grouped into one target, and
the targets are ranked by time. plan.yaml keeps the kernel-type targets for `autokernel run`,
and with `add_compiled` what torch.compile makes of the model beside them (compile_profile.py).
"""

from __future__ import annotations

import time
from pathlib import Path

import torch
from torch.profiler import ProfilerActivity, profile, record_function

from autokernel.atomic import write_atomic
from autokernel.model.loading import LoadedModel
from autokernel.model.profiling.attribution import (
    FORWARD_LABEL,
    KERNEL_TYPES,
    Attribution,
    Instance,
    attribute,
)
from autokernel.model.profiling.compiled import (
    BY_NAMES,
    BY_RATIO,
    measure_compiled,
    target_compile_ms,
)
from autokernel.model.profiling.module_calls import ModuleRecorder
from autokernel.model.profiling.profile import Profile, Row
from autokernel.model.profiling.regions import add_regions
from autokernel.specs import GENERIC

WARMUP = 3  # forwards before profiling
ITERS = 5  # profiled forwards; times are per forward (mean)
PLAN_DTYPES = ("float16", "bfloat16", "float32")  # what the harness benchmarks


def run_profile(
    loaded: LoadedModel, iters: int = ITERS, warmup: int = WARMUP, trace: Path | None = None
) -> Profile:
    """Profile `iters` warm forwards of the loaded model and rank what their time went to."""
    cuda = loaded.device.type == "cuda"
    recorder = ModuleRecorder(loaded.model)
    # The warm-up runs recorded too: the matcher probes duck-typed modules and functions once
    # (a tiny forward each), and those probes must not land in the profiled time.
    with recorder.active():
        for _ in range(max(1, warmup)):
            loaded.run()
    recorder.calls.clear()
    _sync(cuda)
    activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if cuda else [])
    try:
        with profile(activities=activities, record_shapes=True) as prof, recorder.active():
            start = time.perf_counter()
            for _ in range(iters):
                with record_function(FORWARD_LABEL):
                    loaded.run()
            _sync(cuda)
            wall = time.perf_counter() - start
        if trace is not None:
            prof.export_chrome_trace(str(trace))
        result = attribute(list(prof.events()), recorder, device=cuda, iterations=iters)
        summary = _summarize(loaded, result, wall * 1e3 / iters)
        add_regions(summary, loaded, recorder)
    finally:
        recorder.remove()
    summary.rows.sort(key=lambda r: r.ms, reverse=True)
    return summary


def add_compiled(
    prof: Profile, loaded: LoadedModel, iters: int = ITERS, warmup: int = WARMUP
) -> None:
    """Record what torch.compile makes of the model (compile_profile.py); a model or machine
    that cannot compile keeps the eager plan, with the reason in the plan."""
    try:
        prof.compiled = measure_compiled(loaded, prof.total_ms, iters, warmup)
    except Exception as exc:  # no C compiler, an op dynamo cannot trace: eager figures stand
        message = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
        prof.compile_note = f"torch.compile failed: {type(exc).__name__}: {message}"[:300]


def _sync(cuda: bool) -> None:
    if cuda:
        torch.cuda.synchronize()


def _summarize(loaded: LoadedModel, result: Attribution, wall_ms: float) -> Profile:
    n = result.iterations
    per = 1e-3 / n  # µs summed over n forwards → ms per forward
    total_ms = result.forward_us * per
    groups: dict[tuple, list[Instance]] = {}
    for inst in result.instances:
        if inst.kind == GENERIC:
            key = (GENERIC, inst.route)
        elif inst.kind in KERNEL_TYPES:
            key = (
                inst.kind,
                tuple(sorted(inst.shape.items())),
                inst.dtype,
                tuple(sorted((k, repr(v)) for k, v in inst.args.items())),
            )
        else:
            key = ("other", inst.name)
        groups.setdefault(key, []).append(inst)
    # Some torch builds (2.11 with CUDA) record shapes but not dtypes for ops; a target then
    # takes the model's dtype, which is what its inputs are in a model cast with --dtype.
    model_dtype = str(loaded.dtype).removeprefix("torch.")
    rows = []
    for members in groups.values():
        first = members[0]
        ms = sum(m.us for m in members) * per
        if ms == 0 and first.kind not in KERNEL_TYPES:
            continue  # on CUDA: views, reshapes and other ops that launch no kernel
        op = next((m.op for m in members if m.op), "")
        why = next((m.why for m in members if m.why), "")
        rows.append(
            Row(
                kind=first.kind,
                name=first.name,
                shape=first.shape,
                dtype=first.dtype or (model_dtype if first.kind in KERNEL_TYPES else None),
                args=first.args,
                ms=ms,
                calls=max(1, round(len(members) / n)),
                share=ms / total_ms if total_ms > 0 else 0.0,
                where=sorted({m.where for m in members if m.where}),
                route=first.route,
                op=op,
                why=why,
            )
        )
    rows.sort(key=lambda r: r.ms, reverse=True)
    attributed = sum(r.ms for r in rows) + result.overhead_us * per
    return Profile(
        model=loaded.name,
        device=loaded.device.type,
        dtype=str(loaded.dtype).removeprefix("torch."),
        iterations=n,
        rows=rows,
        total_ms=total_ms,
        attributed_ms=attributed,
        profiler_total_ms=result.profiler_total_us * per,
        overhead_ms=result.overhead_us * per,
        wall_ms=wall_ms,
    )


def target_names(rows: list[Row]) -> list[str]:
    """'rmsnorm' for the biggest of its type, then 'rmsnorm_2', 'rmsnorm_3', ...; a generic
    target is named for what the model called ('gelu', 'NewGELUActivation')."""
    seen: dict[str, int] = {}
    names = []
    for r in rows:
        base = r.kind if r.kind != GENERIC else _short(r.name)
        seen[base] = seen.get(base, 0) + 1
        names.append(base if seen[base] == 1 else f"{base}_{seen[base]}")
    return names


def _short(name: str) -> str:
    """A file-name-safe short form of a call's name: 'torch.nn.functional.gelu' -> 'gelu'."""
    last = name.rsplit(".", 1)[-1].strip("_") or "region"
    safe = "".join(c if c.isalnum() or c == "_" else "_" for c in last)[:60]
    return safe if safe[0].isalpha() else f"g_{safe}"


def plan_share(share: float) -> float:
    """A share as plan.yaml writes it: four decimals, but a target's share never rounds to 0,
    which `autokernel run` refuses (a small op beside large products: 3e-5 of the time)."""
    return round(share, 4) or float(f"{share:.2g}")


def plan_data(prof: Profile) -> dict:
    """The plan.yaml content: kernel targets first (what `autokernel run` reads), then the
    context a reader needs (totals, what was left as 'other')."""
    targets = prof.targets
    entries = [
        {
            "name": name,
            "kernel_type": r.kind,
            "shapes": [dict(r.shape)] if r.shape else [],
            "dtype": r.dtype if r.dtype in PLAN_DTYPES else None,
            "share": plan_share(r.share),
            "calls": r.calls,
            "ms": round(r.ms, 4),
            "args": dict(r.args),
            "modules": r.where,
            **({"route": r.route, "region": r.region} if r.kind == GENERIC else {}),
        }
        for name, r in zip(target_names(targets), targets, strict=True)
    ]
    return {
        "model": prof.model,
        "device": prof.device,
        "dtype": prof.dtype,
        "time": "cuda kernel time" if prof.device == "cuda" else "cpu time (no CUDA)",
        "total_ms": round(prof.total_ms, 4),
        **_compiled_plan(prof, entries),
        "targets": entries,
        "other": [
            {
                "name": r.name,
                "ms": round(r.ms, 4),
                "share": round(r.share, 4),
                "calls": r.calls,
                **({"why": r.why} if r.why else {}),
            }
            for r in prof.rows
            if not r.is_target
        ],
    }


def _compiled_plan(prof: Profile, entries: list[dict]) -> dict:
    """The model's eager and compiled forward times; each entry gets its compiled ms and share
    (of the compiled total) and how that figure was found."""
    c = prof.compiled
    if c is None:
        return {"compile": prof.compile_note or "not measured (profile --compile to measure)"}
    rows = prof.targets
    found = target_compile_ms([(r.kind, r.shape, r.ms) for r in rows], c)
    for entry, (ms, how) in zip(entries, found, strict=True):
        entry["compile_ms"] = round(ms, 4)
        total = c.eager_total_ms * c.ratio  # the compiled forward in the eager profile's unit
        entry["compile_share"] = round(ms / total, 4) if total > 0 else None
        entry["compile_from"] = how
    hows = {how for _, how in found}
    return {
        "eager_forward_ms": round(c.eager_forward_ms, 4),
        "compile_forward_ms": round(c.compile_forward_ms, 4),
        "compile_total_ms": round(c.compile_total_ms, 4),
        "compile_attribution": (
            f"{BY_NAMES} where a target's type names Inductor's kernels (compile_from), else "
            f"{BY_RATIO} {c.ratio:.3f}"
            if BY_NAMES in hows
            else f"{BY_RATIO} {c.ratio:.3f} for every target"
        ),
    }


def write_plan(prof: Profile, path: Path) -> None:
    import yaml

    if not prof.targets:
        raise ValueError("no kernel targets found; nothing to write to the plan")
    write_atomic(path, yaml.safe_dump(plan_data(prof), sort_keys=False))
