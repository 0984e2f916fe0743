"""Does `autokernel profile` count each kernel once, and what does torch.compile make of a model?

For single-op problem files (a Model, get_inputs, get_init_inputs) and the examples, one device
call: profile each, report the attributed time against the kernels' total (the check line that
read 118-120 % on single-op files), the figure the attribution gave before it counted each
correlation id's kernels once, how many CPU events torch gave kernels another event of their id
already held (and their names), how many range spans it linked to a range's CPU event, and with
--compile the compiled forward and each target's compiled figure and source.

    python -m benchmarks.profile_check --json benchmarks/results/h200-profile-check.json
    python -m benchmarks.profile_check --small --no-compile      # CPU, tiny sizes (the test)
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path

import torch
from torch.profiler import ProfilerActivity, profile, record_function

ROOT = Path(__file__).resolve().parents[1]

from autokernel.model.loading import ModelSource, load_model  # noqa: E402
from autokernel.model.profiling.attribution import FORWARD_LABEL  # noqa: E402
from autokernel.model.profiling.profiler import add_compiled, plan_data, run_profile  # noqa: E402
from benchmarks import runner  # noqa: E402

# name → (forward expression over x / a, b; inputs at LLM-scale sizes; inputs at tiny sizes)
SINGLE_OPS = {
    "softmax": ("torch.softmax(x, dim=-1)", "[torch.randn(4096, 8192)]", "[torch.randn(8, 64)]"),
    "log_softmax": ("torch.log_softmax(x, dim=-1)", "[torch.randn(4096, 8192)]",
                    "[torch.randn(8, 64)]"),
    "sum_middle": ("torch.sum(x, dim=1)", "[torch.randn(16, 4096, 1024)]",
                   "[torch.randn(2, 8, 16)]"),
    "sum_last": ("x.sum(-1)", "[torch.randn(4096, 8192)]", "[torch.randn(8, 64)]"),
    "matmul": ("torch.matmul(x, y)", "[torch.randn(4096, 4096), torch.randn(4096, 4096)]",
               "[torch.randn(16, 16), torch.randn(16, 16)]"),
    "gelu_tanh": ("torch.nn.functional.gelu(x, approximate='tanh')",
                  "[torch.randn(4096, 8192)]", "[torch.randn(8, 64)]"),
}  # fmt: skip
EXAMPLES = ("llama_style", "gpt2_style")


def _write(folder: Path, name: str, forward: str, inputs: str) -> Path:
    path = folder / f"{name}.py"
    path.write_text(
        "import torch\nfrom torch import nn\n\n"
        "class Model(nn.Module):\n    def forward(self, x, y=None):\n"
        f"        return {forward}\n\n"
        f"def get_inputs():\n    torch.manual_seed(0)\n    return {inputs}\n\n"
        "def get_init_inputs():\n    return []\n"
    )
    return path


def _kernel_us(event, spans: set[str]) -> float:
    return float(sum(k.duration for k in event.kernels if k.name not in spans))


def _links(loaded, iters: int) -> dict[str, object]:
    """The raw evidence: which CPU events torch's parser gave kernels that another CPU event
    of the same correlation id already holds (CUPTI overhead records take the enclosing op's
    id), range spans appended to CPU events, and the sum the attribution used before it
    counted each correlation id's kernels once."""
    cuda = loaded.device.type == "cuda"
    if not cuda:
        return {}
    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
        for _ in range(iters):
            with record_function(FORWARD_LABEL):
                loaded.run()
        torch.cuda.synchronize()
    events = list(prof.events())
    cpu = [e for e in events if e.device_type == torch.autograd.DeviceType.CPU]
    spans = {e.name for e in events
             if e.device_type != torch.autograd.DeviceType.CPU and e.is_user_annotation}  # fmt: skip
    linked = [k for e in cpu for k in e.kernels if k.name in spans]
    first: dict[int, str] = {}
    shared: list[str] = []
    for e in sorted(cpu, key=lambda e: (e.time_range.start, -e.time_range.end)):
        if any(k.name not in spans for k in e.kernels):
            if e.id in first:
                shared.append(f"{e.name} (id of {first[e.id]})")
            else:
                first[e.id] = e.name
    kernels = [e for e in events
               if e.device_type != torch.autograd.DeviceType.CPU and not e.is_user_annotation]  # fmt: skip
    return {
        "spans_linked": len(linked),
        "shared_holders": len(shared),
        "shared_names": sorted(set(shared))[:10],
        "old_attributed_ms": sum(_kernel_us(e, spans) for e in cpu) / iters / 1e3,
        "kernel_total_ms": sum(float(e.self_device_time_total) for e in kernels) / iters / 1e3,
    }


def check(path: Path, iters: int, warmup: int, compile_model: bool) -> dict:
    loaded = load_model(ModelSource(path=path))
    prof = run_profile(loaded, iters=iters, warmup=warmup)
    if compile_model:
        add_compiled(prof, loaded, iters=iters, warmup=warmup)
    plan = plan_data(prof) if prof.targets else {"targets": []}
    return {
        "case": path.stem, "device": prof.device, "dtype": prof.dtype,
        "attributed_ms": prof.attributed_ms, "total_ms": prof.total_ms,
        "consistent": prof.consistent, "share_sum": sum(r.share for r in prof.rows),
        **_links(loaded, iters),
        **{k: plan.get(k) for k in ("eager_forward_ms", "compile_forward_ms",
                                    "compile_attribution", "compile") if k in plan},
        "targets": [{k: t.get(k) for k in ("name", "kernel_type", "share", "compile_share",
                                           "compile_from")} for t in plan["targets"]],
    }  # fmt: skip


def _cell(row: dict, key: str) -> str:
    v = row.get(key)
    return f"{v:.4g}" if isinstance(v, float) else ("-" if v is None else str(v))


def markdown(rows: list[dict]) -> str:
    """One line per case; row shares leave out the CPU's Python overhead (none on CUDA)."""
    lines = ["| case | device | attributed ms | kernels ms | check | row shares | spans linked | "
             "shared-id holders | before the fix ms | eager fwd ms | compile fwd ms |",
             "|" + "---|" * 11]  # fmt: skip
    for r in rows:
        cells = [_cell(r, k) for k in ("case", "device", "attributed_ms", "total_ms")]
        cells += ["consistent" if r["consistent"] else "MISMATCH", f"{r['share_sum']:.1%}"]
        cells += [_cell(r, k) for k in ("spans_linked", "shared_holders", "old_attributed_ms", "eager_forward_ms",
                                         "compile_forward_ms")]  # fmt: skip
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--small", action="store_true", help="tiny sizes (CPU)")
    ap.add_argument("--no-compile", action="store_true", help="skip torch.compile")
    ap.add_argument("--iters", type=int, default=5)
    ap.add_argument("--warmup", type=int, default=3)
    ap.add_argument("--json", type=Path, help="also write the rows here")
    args = runner.add_arguments(ap).parse_args(argv)
    args.commit = args.commit or runner.tree_commit()
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        paths = [_write(Path(tmp), name, fwd, small if args.small else big)
                 for name, (fwd, big, small) in SINGLE_OPS.items()]  # fmt: skip
        if not args.small:
            paths += [ROOT / "examples" / f"{name}.py" for name in EXAMPLES]
        for path in paths:
            start = time.perf_counter()
            try:
                row = check(path, args.iters, args.warmup, not args.no_compile)
            except Exception as exc:  # one case failing must not lose the others' figures
                row = {"case": path.stem, "device": "-", "error": f"{type(exc).__name__}: {exc}",
                       "consistent": False, "share_sum": 0.0}  # fmt: skip
            row["seconds"] = round(time.perf_counter() - start, 1)
            rows.append(row)
            print(json.dumps(row), flush=True)
    print(markdown(rows))
    runner.record("profile_check", rows, markdown(rows), commit=args.commit, results=args.results)
    if args.json:
        meta = {"torch": torch.__version__, "commit": args.commit,
                "gpu": torch.cuda.get_device_name() if torch.cuda.is_available() else None}  # fmt: skip
        args.json.write_text(json.dumps({**meta, "rows": rows}, indent=1) + "\n")
    return 0 if all(r["consistent"] for r in rows if "error" not in r) else 1


if __name__ == "__main__":
    sys.exit(main())
