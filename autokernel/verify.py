"""`autokernel verify`: the optimized kernels in the whole model, still right and how much faster.

Kernels come from the workspace: optimized/<target>.py, else the target's best kept commit's
kernel.py (read through git), else the target is skipped with a note. The model runs eagerly
and patched on the same inputs; each output is compared relative to its scale,
max|patched - eager| / max(1, max|eager|), against the dtype's harness tolerance times
ACCUMULATION_FACTOR. A replacement whose kernel never ran is an error, with the reason its calls
fell back or that nothing in the model matched it. On a GPU a target whose best measured slower
than eager stays with PyTorch (--keep-slower overrides). Timing: eager, patched and
torch.compile(eager) through the harness's one timing path, next to the Amdahl prediction from
the per-kernel speedups in the run's state file.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Annotated, Any

import torch
import typer
from rich.console import Console
from rich.table import Table
from torch import nn

from autokernel.harness.timing import clock_name, measure
from autokernel.judged import UnjudgedKernel, require_judged
from autokernel.kernel_ops import KernelLoadError, LoadedKernel, Policy, load_kernel
from autokernel.patching import Patch
from autokernel.render import output_console
from autokernel.specs import TOLERANCES, dtype_name

# Each patched op may differ from eager by up to its harness tolerance, and independent rounding
# differences grow slowly through residual layers; 5x leaves room for that in a small model
# while a wrong kernel (errors of the order of the output's scale) fails by orders of magnitude.
ACCUMULATION_FACTOR = 5.0
VERIFY_DIR = Path(".autokernel") / "verify"  # best-commit kernels written here to load by path
KERNEL = "kernel.py"

WHERE = {
    "matmul": "nn.Linear modules",
    "layernorm": "nn.LayerNorm modules",
    "rmsnorm": "modules named *RMSNorm* with weight and eps",
    "fused_mlp": "modules with gate_proj/up_proj/down_proj Linears (SwiGLU)",
    "flash_attention": "F.scaled_dot_product_attention calls",
    "softmax": "F.softmax/torch.softmax calls",
    "cross_entropy": "F.cross_entropy calls",
    "reduce": "torch.sum(x, dim=-1) calls (Tensor.sum is not patched)",
    "rotary_embedding": "module-level apply_rotary/apply_rotary_pos_emb functions",
}


class VerifyError(Exception):
    """Bad input to verify (no kernels, unreadable state, a model that fails); exit code 2."""


@dataclass
class OutputCheck:
    name: str
    dtype: str
    error: float  # max|diff| / max(1, max|ref|); inf for a shape, dtype or NaN mismatch
    tolerance: float

    @property
    def ok(self) -> bool:
        return self.error <= self.tolerance


@dataclass
class VerifyResult:
    model: str
    device: str
    dtype: str
    kernels: dict[str, str]  # target name -> kernel file (or commit) it came from
    outputs: list[OutputCheck]
    calls: dict[str, dict]  # kernel type -> kernel/fallback counts and reasons
    errors: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    clock: str = ""
    eager_ms: float | None = None
    patched_ms: float | None = None
    compile_ms: float | None = None
    predicted_speedup: float | None = None  # Amdahl, from the per-kernel speedups

    @property
    def outputs_match(self) -> bool:
        return all(o.ok for o in self.outputs)

    @property
    def ok(self) -> bool:
        return self.outputs_match and not self.errors

    def speedup(self, baseline_ms: float | None) -> float | None:
        if baseline_ms and self.patched_ms:
            return baseline_ms / self.patched_ms
        return None

    def to_json(self) -> dict:
        data = asdict(self)
        data["outputs"] = [{**asdict(o), "ok": o.ok} for o in self.outputs]
        data |= {"ok": self.ok, "outputs_match": self.outputs_match,
                 "speedup_vs_eager": self.speedup(self.eager_ms),
                 "speedup_vs_compile": self.speedup(self.compile_ms)}  # fmt: skip
        return data


def collect_kernels(
    workspace: Path, skip_slower: bool = False
) -> tuple[list[LoadedKernel], dict[str, str], list[str]]:
    """(kernels, where each came from, notes) for the workspace's targets. With skip_slower, a
    target whose best is slower than what it replaces (TargetState.model_gain) stays with PyTorch:
    on a GPU plugging it in could only slow the model down."""
    import orchestrate

    try:
        state = orchestrate.load(workspace)
    except ValueError as exc:
        raise VerifyError(str(exc)) from None
    kernels, origin, notes = [], {}, []
    if state is None:
        for path in sorted((workspace / "optimized").glob("*.py")):
            kernels.append(_load(path, path.stem))
            origin[path.stem] = str(path)
    else:
        for ts in state.targets:
            name, shapes = ts.name, ts.target.shapes
            x = ts.model_gain()
            if skip_slower and x is not None and x < 1.0:
                notes.append(f"{name}: left to PyTorch: its best is slower than what it replaces"
                             f" ({x:.2f}x); --keep-slower uses it anyway")  # fmt: skip
                continue
            path = workspace / "optimized" / f"{name}.py"
            if path.is_file():
                origin[name] = str(path)
            elif ts.best_commit:
                path = _from_commit(workspace, ts.best_commit, name)
                origin[name] = f"{KERNEL} at {ts.best_commit[:10]}"
            else:
                notes.append(f"{name}: skipped: no optimized/{name}.py and no kept commit")
                continue
            kernels.append(_load(path, name, shapes))
    if not kernels:
        raise VerifyError(
            f"no kernels in {workspace}: expected optimized/<target>.py or a run's "
            f"{orchestrate.STATE_FILE} with kept commits"
        )
    return kernels, origin, notes


def _load(path: Path, name: str, shapes: tuple = ()) -> LoadedKernel:
    try:
        require_judged(path)  # the user's own process: only files a PASS verdict recorded
        return load_kernel(path, name, shapes)
    except (KernelLoadError, UnjudgedKernel) as exc:
        raise VerifyError(str(exc)) from None


def _from_commit(workspace: Path, sha: str, name: str) -> Path:
    from autokernel.workspace import Workspace, WorkspaceError

    try:
        source = Workspace.open(workspace).show(sha, KERNEL)
    except WorkspaceError as exc:
        raise VerifyError(f"{name}: cannot read its best kernel: {exc}") from None
    path = workspace / VERIFY_DIR / f"{name}.py"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(source)
    return path


def amdahl(workspace: Path, used: set[str]) -> float | None:
    """1 / (sum(share_i / s_i) + rest) over the targets whose kernel ran, with the plan's shares;
    s_i is the model's profiled time for the target over its best kernel's time at that shape
    (TargetState.model_gain), else the best speedup vs eager. None without any speedup."""
    import orchestrate
    from autokernel import stats

    try:
        state = orchestrate.load(workspace)
    except ValueError:
        return None
    if state is None:
        return None
    parts = [(ts.target.share, ts.model_gain()) for ts in state.targets if ts.name in used]
    parts = [(share, x) for share, x in parts if x]
    total = sum(share for share, _ in parts)
    if not parts or total <= 0:
        return None
    norm = max(1.0, total)  # shares over 1 (overlapping plan entries): scale them down
    return stats.amdahl((share / norm, s) for share, s in parts)


def _tensors(obj: Any, name: str = "output") -> list[tuple[str, torch.Tensor]]:
    if isinstance(obj, torch.Tensor):
        return [(name, obj)]
    if isinstance(obj, dict):
        return [t for k, v in obj.items() for t in _tensors(v, f"{name}.{k}")]
    if isinstance(obj, (list, tuple)):
        return [t for i, v in enumerate(obj) for t in _tensors(v, f"{name}[{i}]")]
    return []


def compare(ref: Any, out: Any, model_dtype: torch.dtype, factor: float) -> list[OutputCheck]:
    """Every tensor in the outputs, error relative to the eager output's scale."""
    refs, outs = _tensors(ref), _tensors(out)
    if len(refs) != len(outs):
        return [OutputCheck("output structure", "-", float("inf"), 0.0)]
    checks = []
    for (name, r), (_, o) in zip(refs, outs, strict=True):
        loosest = max(TOLERANCES.get(d, (0.0,))[0] for d in (r.dtype, model_dtype))  # atol
        tol = loosest * factor if r.is_floating_point() else 0.0
        if r.shape != o.shape or r.dtype != o.dtype:
            err = float("inf")
        elif not r.is_floating_point():
            err = 0.0 if torch.equal(r, o) else float("inf")
        elif r.numel() == 0:
            err = 0.0
        else:
            r64, o64 = r.double(), o.double()
            same_nan = torch.equal(r64.isnan(), o64.isnan())
            diff = (r64 - o64).nan_to_num(0.0).abs().max().item()
            scale = max(1.0, r64.nan_to_num(0.0).abs().max().item())
            err = diff / scale if same_nan else float("inf")
        checks.append(OutputCheck(name, dtype_name(r.dtype), err, tol))
    return checks


def verify_model(
    model: nn.Module,
    inputs: list,
    kernels: list[LoadedKernel],
    *,
    name: str = "model",
    policy: Policy = "dtype",
    timing: bool = True,
    with_compile: bool = True,
    factor: float = ACCUMULATION_FACTOR,
) -> VerifyResult:
    """Eager vs patched on the same inputs, call counts, and (optionally) the timings."""
    params = [p for p in model.parameters() if p.is_floating_point()]
    device = params[0].device if params else torch.device("cpu")
    dtype = params[0].dtype if params else torch.float32
    patch = Patch(kernels, policy)
    try:
        with torch.no_grad():
            try:
                ref = model(*inputs)
            except Exception as exc:
                raise VerifyError(
                    f"the model's forward raised {type(exc).__name__}: {exc}"
                ) from exc
            with patch.applied(model):
                out = model(*inputs)
        result = VerifyResult(
            model=name, device=str(device), dtype=dtype_name(dtype),
            kernels={k.name: str(k.path) for k in kernels},
            outputs=compare(ref, out, dtype, factor), calls=patch.counts(),
            notes=list(dict.fromkeys(patch.notes)),
        )  # fmt: skip
        result.errors = _never_called(patch)
        if timing:
            _time(result, model, inputs, patch, device, with_compile)
    finally:
        patch.close()
    return result


def _never_called(patch: Patch) -> list[str]:
    errors = []
    for kind, c in patch.counts().items():
        if c["kernel"]:
            continue
        if not c["sites"]:
            errors.append(f"{kind}: never called: nothing in the model matched ({WHERE[kind]})")
        else:
            reasons = "; ".join(f"{r} ({n}x)" for r, n in c["fallback_reasons"].items())
            errors.append(f"{kind}: never called: all {c['fallback']} calls fell back: {reasons}")
    return errors


def _time(
    result: VerifyResult, model: nn.Module, inputs: list, patch: Patch, device, with_compile: bool
) -> None:
    on_gpu = device.type == "cuda"
    result.clock = clock_name(on_gpu)

    def ms(fn) -> float:
        with torch.no_grad():
            return measure(fn, on_gpu).median_us / 1e3

    result.eager_ms = ms(lambda: model(*inputs))
    with patch.applied(model):
        result.patched_ms = ms(lambda: model(*inputs))
    if with_compile:
        try:
            compiled = torch.compile(model)
            result.compile_ms = ms(lambda: compiled(*inputs))
        except Exception as exc:  # no C compiler, an unsupported op: report, do not fail
            result.notes.append(f"torch.compile unavailable: {type(exc).__name__}: {exc}")


def verify_workspace(
    source: Any, workspace: Path, keep_slower: bool = False, **options: Any
) -> VerifyResult:
    """Load the model (autokernel.model_input) and the workspace's kernels, then verify."""
    from autokernel.model_input import ModelInputError, load_model

    # A workspace with nothing to verify fails now, not after a large model has loaded (which
    # kernels count depends on the model's device, so they are collected again below).
    collect_kernels(workspace)
    try:
        loaded = load_model(source)
    except ModelInputError as exc:
        raise VerifyError(str(exc)) from None
    skip = loaded.device.type == "cuda" and not keep_slower  # CPU figures: interpreter, not speed
    kernels, origin, notes = collect_kernels(workspace, skip_slower=skip)
    result = verify_model(loaded.model, loaded.inputs, kernels, name=loaded.name, **options)
    result.kernels, result.notes = origin, notes + result.notes
    result.predicted_speedup = amdahl(workspace, {k.name for k in kernels if _ran(result, k)})
    return result


def _ran(result: VerifyResult, k: LoadedKernel) -> bool:
    return result.calls.get(k.kernel_type, {}).get("by_kernel", {}).get(k.name, 0) > 0


def verify_command(
    model_file: Annotated[
        Path | None, typer.Argument(help="Model file (KernelBench convention).")
    ] = None,
    workspace: Annotated[Path, typer.Option("--workspace", "-w", help="Run directory.")] = Path(),
    class_name: Annotated[str | None, typer.Option("--class", help="Model class to build.")] = None,
    input_shape: Annotated[
        str | None, typer.Option(help="Input shape for --class, e.g. 2x128.")
    ] = None,
    hf_config: Annotated[
        str | None, typer.Option(help="Hugging Face config name or file (no weights).")
    ] = None,
    dtype: Annotated[str | None, typer.Option(help="Model dtype (default bf16 on GPU).")] = None,
    device: Annotated[str | None, typer.Option(help="cuda or cpu (default: cuda if any).")] = None,
    plan_shapes_only: Annotated[
        bool, typer.Option(help="Run kernels only at the plan's shapes; PyTorch elsewhere.")
    ] = False,
    compile_baseline: Annotated[
        bool, typer.Option("--compile/--no-compile", help="Also time torch.compile(eager).")
    ] = True,
    keep_slower: Annotated[
        bool,
        typer.Option(help="On a GPU, also use kernels whose best was slower than eager."),
    ] = False,
    json_out: Annotated[Path | None, typer.Option("--json", help="Write the result here.")] = None,
) -> None:
    """Put the optimized kernels into the model: outputs vs eager, call counts, speedup."""
    try:
        from autokernel.model_input import ModelInputError, ModelSource, parse_input_shape
    except ImportError as exc:
        typer.echo(f"error: cannot load models: {exc}", err=True)
        raise typer.Exit(2) from None
    try:
        shape = parse_input_shape(input_shape) if input_shape else None
        source = ModelSource(path=model_file, class_name=class_name, input_shape=shape,
                             hf_config=hf_config, dtype=dtype, device=device)  # fmt: skip
        policy: Policy = "plan" if plan_shapes_only else "dtype"
        result = verify_workspace(source, workspace, policy=policy, with_compile=compile_baseline,
                                  keep_slower=keep_slower)  # fmt: skip
    except (VerifyError, ModelInputError) as exc:
        typer.echo(f"error: {exc}", err=True)
        raise typer.Exit(2) from None
    render(result, output_console())
    if json_out:
        try:
            json_out.write_text(json.dumps(result.to_json(), indent=2) + "\n")
        except OSError as exc:
            typer.echo(f"error: cannot write {json_out}: {exc}", err=True)
            raise typer.Exit(2) from None
    raise typer.Exit(0 if result.ok else 1)


def render(result: VerifyResult, console: Console) -> None:
    """The verdict first, then calls per kernel type, outputs, timings and notes."""
    verdict = "[bold green]PASS[/]" if result.ok else "[bold red]FAIL[/]"
    console.print(f"{verdict} {result.model} on {result.device}, {result.dtype}")
    calls = Table("type", "kernel calls", "fallbacks", "sites", "fallback reasons")
    for kind, c in result.calls.items():
        why = "; ".join(f"{r} ({n}x)" for r, n in c["fallback_reasons"].items())
        calls.add_row(kind, str(c["kernel"]), str(c["fallback"]), str(c["sites"]), why)
    console.print(calls)
    outs = Table("output", "dtype", "error (rel. to scale)", "tolerance", "")
    for o in result.outputs:
        outs.add_row(o.name, o.dtype, f"{o.error:.3g}", f"{o.tolerance:.3g}",
                     "ok" if o.ok else "[red]MISMATCH[/]")  # fmt: skip
    console.print(outs)
    if result.eager_ms is not None:
        console.print(f"time ({result.clock}):")
        for label, t in (("eager", result.eager_ms), ("patched", result.patched_ms),
                         ("torch.compile", result.compile_ms)):  # fmt: skip
            if t is not None:
                console.print(f"  {label:<14} {t:10.3f} ms")
        for label, base in (("eager", result.eager_ms), ("torch.compile", result.compile_ms)):
            x = result.speedup(base)
            if x is not None:
                console.print(f"  speedup vs {label}: {x:.2f}x")
    if result.predicted_speedup is not None:
        console.print(
            f"  Amdahl prediction from the kernels' speedups: {result.predicted_speedup:.2f}x"
        )
    for e in result.errors:
        console.print(f"[red]error:[/] {e}", markup=True, highlight=False)
    for n in result.notes:
        console.print(f"note: {n}", markup=False, highlight=False)
