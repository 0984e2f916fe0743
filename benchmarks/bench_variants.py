"""Building and timing each variant of one case for benchmarks/kernels_vs_baselines.py: our
kernel files, eager PyTorch, torch.compile (max-autotune), Liger-Kernel and the copy ceiling.

Why they share one path: a goal compares our kernel with the best alternative, which only means
something if every variant runs on the same inputs, is timed by the same clock
(autokernel.timing.measure) and is checked against the same float64 reference. A variant
that is wrong, raises or runs out of budget still becomes a row with a note, never a crash and
never a silent gap.
"""

from __future__ import annotations

import ast
import gc
import importlib.util
import math
import sys
from collections.abc import Callable
from pathlib import Path
from types import ModuleType
from typing import Any

import torch

from autokernel.harness.compiled import device_limits, forget, kernel_facts
from autokernel.kernel_file import import_file
from autokernel.specs import KernelSpec, dtype_name
from autokernel.timing import host_per_call_us, measure
from benchmarks.bench_cases import (
    COMPILE,
    COPY,
    EAGER,
    EAGER_NOTES,
    LIGER,
    ON_GPU,
    OURS,
    BudgetExceeded,
    Case,
    Row,
    Run,
    case_row,
    deadline,
)

SEED = 0
COPY_NUMEL_GPU = 2**30  # bf16 elements: 4.3 GB moved, the anchor's copy ceiling (4249 GB/s)
COPY_NUMEL_CPU = 2**20
COMPILE_MIN_S = 40.0  # a cold max-autotune compile takes tens of seconds
WRITE_RESERVE_S = 5.0  # kept back for writing both files
REF_SCORES_BYTES = 2 * 2**30  # float64 attention scores per reference chunk


def _declared_type(path: Path) -> str | None:
    """KERNEL_TYPE read without importing the file."""
    try:
        tree = ast.parse(path.read_text())
    except (SyntaxError, UnicodeDecodeError, OSError):
        return None
    for node in tree.body:
        if (
            isinstance(node, ast.Assign)
            and any(isinstance(t, ast.Name) and t.id == "KERNEL_TYPE" for t in node.targets)
            and isinstance(node.value, ast.Constant)
        ):
            return str(node.value.value)
    return None


def load_module(path: Path, name: str) -> ModuleType:
    """Import a kernel file by path under `name` (registered, so its functions can be found
    again from kernel_fn.__module__)."""
    return import_file(path, name, register=True)


def load_kernels(kernels_dir: Path, op: str) -> list[tuple[str, Callable | None, str]]:
    """(variant, kernel_fn or None, note) for every file of this type: "<type>.py" is
    "autokernel", any other file declaring KERNEL_TYPE = "<type>" is "autokernel:<stem>"."""
    found = []
    for path in sorted(kernels_dir.glob("*.py")):
        declared = _declared_type(path)
        if path.name.startswith("_") or (declared or path.stem) != op:
            continue
        variant = OURS if path.stem == op else f"{OURS}:{path.stem}"
        name = f"_bench_kernel_{path.stem}"
        try:
            found.append((variant, load_module(path, name).kernel_fn, ""))
        except Exception as exc:  # a broken file is a row with its error, not a crash
            found.append((variant, None, f"import failed: {type(exc).__name__}: {exc}"[:300]))
    return found or [(OURS, None, f"no kernel file for {op} in {kernels_dir}")]


def _eager(spec: KernelSpec) -> Callable:
    if spec.name != "flash_attention" or not ON_GPU:
        return spec.eager
    from torch.nn.attention import SDPBackend, sdpa_kernel

    def flash(*args: Any) -> torch.Tensor:
        if len(args) > 5 and args[5] is not None:  # the flash backend takes no mask
            return spec.eager(*args)
        with sdpa_kernel(SDPBackend.FLASH_ATTENTION):
            return spec.eager(*args)

    return flash


def _compiled(spec: KernelSpec, args: tuple) -> Callable:
    import torch._dynamo

    # max-autotune replays CUDA graphs, which copy every input not marked static into the
    # graph's own buffer on each call: a full extra read and write of x for a row-wise op.
    for a in args:
        if torch.is_tensor(a):
            torch._dynamo.mark_static_address(a)
    return torch.compile(spec.eager, mode="max-autotune", dynamic=False)


def liger_available() -> bool:
    return ON_GPU and importlib.util.find_spec("liger_kernel") is not None


def _liger(op: str, args: tuple) -> tuple[Callable, str] | None:
    """Liger's forward for the types it has, or None."""
    if op == "rmsnorm":
        from liger_kernel.transformers.functional import liger_rms_norm

        return liger_rms_norm, "casting_mode llama"
    if op == "layernorm":
        from liger_kernel.transformers.functional import liger_layer_norm

        return liger_layer_norm, ""
    if op == "softmax":
        from liger_kernel.ops.softmax import LigerSoftmaxFunction

        return LigerSoftmaxFunction.apply, ""
    if op == "cross_entropy":
        from liger_kernel.transformers.functional import liger_cross_entropy

        own = args[0].clone()  # it may write the gradient into its input: keep ours intact
        return (lambda _logits, t: liger_cross_entropy(own, t)), "may also write the gradient"
    return None  # reduce: none; rotary: Liger rotates q and k together, not the same work


def reference(spec: KernelSpec, args: tuple) -> torch.Tensor:
    """float64 reference.py on the same inputs; attention in head chunks so its float64
    scores stay within REF_SCORES_BYTES (seq 8192 would need 17 GB at once)."""
    d = tuple(a.double() if torch.is_tensor(a) and a.is_floating_point() else a for a in args)
    if spec.name != "flash_attention":
        return spec.reference(*d)
    q, k, v, causal, sm_scale, mask = d
    if mask is not None:
        mask = mask.expand(q.shape[0], q.shape[1], q.shape[2], k.shape[2])
    group = q.shape[1] // k.shape[1]
    step = max(1, REF_SCORES_BYTES // (group * q.shape[2] * k.shape[2] * 8))
    out = torch.empty_like(q)
    for b in range(q.shape[0]):
        for h in range(0, k.shape[1], step):
            qs = slice(h * group, (h + step) * group)
            out[b : b + 1, qs] = spec.reference(
                q[b : b + 1, qs],
                k[b : b + 1, h : h + step],
                v[b : b + 1, h : h + step],
                causal,
                sm_scale,
                None if mask is None else mask[b : b + 1, qs],
            )
    return out


def rel_err(out: object, ref: torch.Tensor) -> tuple[float | None, str]:
    """max|out - ref| / max(1, max|ref|), or None and why no number is possible."""
    if not torch.is_tensor(out):
        return None, f"returned {type(out).__name__}, not a tensor"
    if out.shape != ref.shape:
        return None, f"shape {tuple(out.shape)}, reference {tuple(ref.shape)}"
    diff = (out.double() - ref).abs().max().item()
    if not math.isfinite(diff):
        return None, "output has NaN or inf"
    return float(f"{diff / max(1.0, ref.abs().max().item()):.3g}"), ""


def time_variant(
    run: Run, case: Case, variant: str, fn: Callable, args: tuple, ref: torch.Tensor, note: str
) -> Row:
    """First call (compiles, outside the timing) checked against the reference, then timed."""
    module = sys.modules.get(getattr(fn, "__module__", "")) if variant.startswith(OURS) else None
    if module is not None:
        forget(module)  # what the first call compiles or reloads is what this size uses
    try:
        with deadline(run.left() - WRITE_RESERVE_S):
            out = fn(*args)
            err, problem = rel_err(out, ref)
            del out
            us = measure(lambda: fn(*args), run.device.type == "cuda").median_us
            host = host_per_call_us(lambda: fn(*args), True) if module and ON_GPU else None
    except BudgetExceeded:
        return case_row(case, variant, note="stopped: budget")
    except Exception as exc:  # a variant that cannot run is a row with its error
        return case_row(case, variant, note=f"failed: {type(exc).__name__}: {exc}"[:300])
    facts = kernel_facts(module, device_limits()) if module is not None and ON_GPU else None
    if facts:  # what limits a slow row is often visible here: spills, occupancy, load widths
        note = "; ".join(x for x in (note, *(f.describe() for f in facts)) if x)
    if host is not None:  # a kernel shorter than its launch: the figure depends on the host
        bound = " (host-bound: more than the kernel's time)" if host > us else ""
        note = "; ".join(x for x in (note, f"host {host:.1f} us per call{bound}") if x)
    tol = case.spec.tolerance(case.dtype)[0]
    wrong = err is None or err > tol
    if wrong:
        why = problem or f"rel err {err:.1e} > tolerance {tol:.0e}"
        note = "; ".join(x for x in (f"WRONG: {why}", note) if x)
    return case_row(case, variant, us, err, note, wrong)


def _time_copy(numel: int, device: torch.device) -> float:
    src = torch.empty(numel, dtype=torch.bfloat16, device=device).normal_()
    dst = torch.empty_like(src)
    return measure(lambda: dst.copy_(src), device.type == "cuda").median_us


def copy_row(run: Run, case: Case | None) -> Row:
    """A device-to-device copy moving the same bytes (half read, half written)."""
    if case is None:
        numel = COPY_NUMEL_GPU if run.device.type == "cuda" else COPY_NUMEL_CPU
        head = ("copy", str(numel), dtype_name(torch.bfloat16))
    else:
        numel = max(1, round(case.spec.bytes_moved(case.size, case.dtype) / 4))
        head = case.key
    try:
        with deadline(run.left() - WRITE_RESERVE_S):
            us = _time_copy(numel, run.device)
    except BudgetExceeded:
        return Row(*head, COPY, None, None, "GBps", None, "stopped: budget")
    except RuntimeError as exc:  # out of memory for the largest copies
        return Row(*head, COPY, None, None, "GBps", None, f"failed: {exc}"[:300])
    note = "device copy (read + write)" + ("" if case is None else " of the same bytes")
    return Row(*head, COPY, us, 2 * numel * 2 / us / 1e3, "GBps", None, note)


def run_case(run: Run, case: Case) -> None:
    spec, on_gpu = case.spec, run.device.type == "cuda"
    if case.op not in run.kernels:
        run.kernels[case.op] = load_kernels(run.kernels_dir, case.op)
    wants = set(case.only or (OURS, EAGER, COPY, LIGER, COMPILE))
    with deadline(run.left() - WRITE_RESERVE_S):
        gen = torch.Generator(device=run.device).manual_seed(SEED)
        args = spec.make_inputs(case.size, case.dtype, gen, run.device)
        ref = reference(spec, args)
    if OURS in wants:
        for variant, fn, note in run.kernels[case.op]:
            if fn is None:
                run.rows.append(case_row(case, variant, note=note, wrong=True))
            else:
                run.rows.append(time_variant(run, case, variant, fn, args, ref, case.what))
    if EAGER in wants:
        row = time_variant(run, case, EAGER, _eager(spec), args, ref, EAGER_NOTES[case.op])
        if row.note.startswith("failed") and spec.name == "flash_attention" and on_gpu:
            # The flash backend refused (e.g. GQA on this torch): SDPA's own choice instead.
            row = time_variant(
                run,
                case,
                EAGER,
                spec.eager,
                args,
                ref,
                f"SDPA default backend; flash refused: {row.note}"[:300],
            )
        run.rows.append(row)
    if COPY in wants and spec.bound == "memory":
        run.rows.append(copy_row(run, case))
    if LIGER in wants and liger_available():
        try:
            made = _liger(case.op, args)
        except Exception as exc:  # an API that moved between Liger versions
            run.rows.append(
                case_row(case, LIGER, note=f"failed: {type(exc).__name__}: {exc}"[:300])
            )
            made = None
        if made is not None:
            run.rows.append(time_variant(run, case, LIGER, made[0], args, ref, made[1]))
    if COMPILE in wants and run.with_compile and (COMPILE in case.only or spec.bound == "memory"):
        if run.left() < COMPILE_MIN_S:
            note = (
                f"skipped: budget ({run.left():.0f} s left; a max-autotune compile takes tens of s)"
            )
            run.rows.append(case_row(case, COMPILE, note=note))
        else:
            try:
                compiled = _compiled(spec, args)
            except Exception as exc:  # mark_static_address missing or refusing
                run.rows.append(
                    case_row(case, COMPILE, note=f"failed: {type(exc).__name__}: {exc}")
                )
                return
            note = "compile time excluded"
            run.rows.append(time_variant(run, case, COMPILE, compiled, args, ref, note))


def free_memory(compiled: bool) -> None:
    """Between sizes: the next size's inputs and reference need the memory this one held."""
    if compiled:
        from torch import _dynamo  # "import torch._dynamo" here would make torch a local name

        _dynamo.reset()  # drops the compiled graphs and their CUDA-graph pools
    gc.collect()
    if ON_GPU:
        torch.cuda.empty_cache()
