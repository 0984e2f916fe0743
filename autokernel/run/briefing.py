"""What an agent is told before each experiment: the Context, built from the run's state.

Only facts the harness and the results established go in; the prompt builder (for LLMs) decides
how much of it fits.
"""

from __future__ import annotations

import inspect

from autokernel import backends, reference
from autokernel.agents.base import Context
from autokernel.run.state import State, TargetState
from autokernel.shipped import PROGRAM
from autokernel.specs import GENERIC, parse_dtype
from autokernel.specs.region import Region
from autokernel.targets import Target


def target_starter(target: Target, backend: str = "triton") -> tuple[str, str]:
    """(source, what it is) of the kernel a target's night starts from: the shipped starter of
    its type in the backend, or for a generic target the Triton torch.compile generates for its
    region (Triton whatever the backend: Inductor writes no CUDA C++)."""
    if target.kernel_type != GENERIC:
        path = backends.starter_path(target.kernel_type, backend)
        shown = path.relative_to(backends.STARTERS.parent)
        return path.read_text(), f"baseline: the shipped {shown}"
    import torch

    from autokernel.model.generic_starter import starter_for

    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    return starter_for(target.region or {}, device), "baseline: torch.compile's own Triton"


def reference_text(target: Target) -> str:
    if target.kernel_type == GENERIC:
        return Region.from_dict(target.region or {}).text()
    return inspect.getsource(getattr(reference, target.kernel_type))


def spec_text(ts: TargetState, on_gpu: bool) -> str:
    t = ts.target
    spec = t.spec()
    sizes = spec.sizes(on_gpu)
    dtype = t.dtype or str(spec.bench_dtype_gpu if on_gpu else spec.bench_dtype_cpu)
    if t.kernel_type == GENERIC:
        signature = (f"signature: kernel_fn({', '.join(spec.arg_names)})  (the region's inputs "
                     "in order; the result is the region's, below)")  # fmt: skip
        checked = "correctness is checked in that dtype, the one the model runs it in"
    else:
        fn = getattr(reference, t.kernel_type)
        signature = (f"signature: kernel_fn{inspect.signature(fn)}  (same arguments and result "
                     f"as reference.{t.kernel_type})")  # fmt: skip
        checked = "correctness is checked in float16, bfloat16 and float32"
    lines = [
        f"target: {t.name} (kernel type {t.kernel_type}, {spec.bound}-bound)",
        signature,
        f"benchmark dtype: {dtype.removeprefix('torch.')}; {checked}",
    ]
    if t.shapes:
        lines.append("the model's real shapes (timed, and decide keep/revert): "
                     + "; ".join(spec.label(s) for s in t.shapes))  # fmt: skip
    lines.append("benchmark sizes: " + "; ".join(spec.label(s) for s in sizes.bench))
    lines.append("sweep sizes: " + "; ".join(spec.label(s) for s in sizes.sweep))
    lines.append("odd sizes: " + "; ".join(spec.label(s) for s in sizes.odd))
    lines.append(
        "adversarial inputs: " + "; ".join(f"{a.name} ({a.why})" for a in spec.adversarial)
    )
    tol = [
        f"{d}: atol=rtol={spec.tolerance(parse_dtype(d))[0]:g}" for d in ("fp16", "bf16", "fp32")
    ]
    lines.append("tolerances vs a float64 reference: " + ", ".join(tol))
    if t.args:
        lines.append(
            "arguments as the model uses them: " + ", ".join(f"{k}={v}" for k, v in t.args.items())
        )
    return "\n".join(lines)


def roofline_text(ts: TargetState) -> str:
    b, base = ts.best, ts.baseline
    if b is None:
        return "no passing kernel measured yet"
    parts = [f"best {b.us:.1f} µs (geometric mean over the timed sizes)"]
    if b.throughput is not None:
        parts.append(f"{b.throughput:.4g} {b.unit}")
    if b.pct_peak is not None:
        parts.append(f"{b.pct_peak:.0f}% of this machine's measured peak")
    if b.speedup_vs_eager is not None:
        parts.append(f"{b.speedup_vs_eager:.2f}x vs eager PyTorch")
    if b.speedup_vs_compile is not None:
        parts.append(f"{b.speedup_vs_compile:.2f}x vs torch.compile")
    if base is not None:
        parts.append(f"{base.us / b.us:.2f}x vs the starter")
    return ", ".join(parts)


def context(
    state: State, ts: TargetState, best_source: str, rows: list[dict[str, str]], on_gpu: bool
) -> Context:
    try:
        program = PROGRAM.read_text()
    except OSError:
        program = ""
    return Context(
        experiment=state.next_experiment,
        target=ts.name,
        kernel_type=ts.target.kernel_type,
        program=program,
        spec_text=spec_text(ts, on_gpu)
        + "\n"
        + backends.briefing(state.backend, ts.target.kernel_type, on_gpu),
        reference_source=reference_text(ts.target),
        kernel_source=best_source,
        history=[r for r in rows if r.get("target") == ts.name],
        last_failure=ts.last_failure,
        roofline=roofline_text(ts),
        tried_configs=list(ts.tried_configs),
        oversized_configs=list(ts.oversized_configs),
        backends=backends.allowed(state.backend, on_gpu),
        other_starter=backends.other_starter(
            state.backend, ts.target.kernel_type, backends.of_source(best_source), on_gpu
        ),
    )
