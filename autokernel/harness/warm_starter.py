"""The shipped starter of a kernel type, run through the stages once by the baseline worker, so
that what it compiles lands in the trusted cache.

Why: a candidate's worker keeps nothing it compiles (cache_tiers.py), and on a GPU Triton builds
every kernel's launcher with the C compiler, once per argument signature (dtypes, pointer
alignment). Candidates derived from a starter (every tuner edit, most LLM edits) share its
signatures, so the baseline worker, which runs only our own code, compiles the starter at the
stage and benchmark sizes: the launchers, and the starter's kernels the first comparison
re-times, are then read-only hits for every candidate. Under the interpreter nothing is compiled
and nothing is run.
"""

from __future__ import annotations

import torch

from autokernel.harness.benchmark import bench_sizes
from autokernel.harness.local import LocalProcess
from autokernel.harness.stages import StageFailure, run_stages
from autokernel.judged import STARTERS
from autokernel.kernel_file import import_file
from autokernel.specs import KernelSpec, Size


def warm(
    spec: KernelSpec,
    device: torch.device,
    dtype: torch.dtype,
    seed: int,
    extra_sizes: tuple[Size, ...],
    quick: bool,
) -> str:
    """Run the starter as an evaluation would (stages, then one call per benchmark size in the
    benchmark dtype); "" when done, else why not."""
    if device.type != "cuda":
        return ""
    path = STARTERS / f"{spec.name}.py"
    if not path.is_file():
        return f"no shipped starter for {spec.name}"
    module = import_file(path, f"autokernel_starter_{path.stem}")
    proc = LocalProcess(spec, [module], device, seed)
    ev = proc.evaluation(extra_sizes=extra_sizes, quick=quick)
    try:
        run_stages(ev)
        gen = torch.Generator(device=device).manual_seed(seed)
        for size in bench_sizes(spec, True, quick, extra_sizes):
            module.kernel_fn(*spec.make_inputs(size, dtype, gen, device))
        torch.cuda.synchronize()
    except (StageFailure, RuntimeError) as exc:
        return f"starter warm-up stopped: {str(exc).splitlines()[0][:200] if str(exc) else exc}"
    return ""
