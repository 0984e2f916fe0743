"""flash_attention under four attn_mask layouts, before and after a change of the starter, beside
SDPA: the timing behind h100-fa-col-2026-12-07-d74a218.md (bf16, full attention, GPU only).

Layouts: constant along keys, bool with strides (0, s, 1, 0) (what Hugging Face 5.17 builds
under torch.compile) and additive; a padding mask expanded over the queries (stride 0, as
eager Hugging Face builds it); the same padding mask dense.

    git show d5063d9:kernels/flash_attention.py > /tmp/fa_before.py
    python -m benchmarks.fa_mask_layouts --before /tmp/fa_before.py --json out.json
"""

from __future__ import annotations

import argparse
import importlib.util
import json
from pathlib import Path
from types import ModuleType

import torch
import torch.nn.functional as F

from benchmarks import runner

ROOT = Path(__file__).resolve().parents[1]
SHAPES = ((4, 16, 1024, 64), (2, 32, 2048, 128))  # BERT-base's and a wider one


def _load(name: str, path: Path) -> ModuleType:
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec and spec.loader, path
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def _masks(b: int, s: int) -> dict[str, torch.Tensor]:
    dev = "cuda"
    lengths = torch.randint(s // 2, s + 1, (b,), device=dev)
    pad = (torch.arange(s, device=dev).view(1, 1, 1, s) < lengths.view(b, 1, 1, 1)).expand(
        b, 1, s, s
    )
    cols = torch.ones(1, 1, s, 1, dtype=torch.bool, device=dev).expand(b, 1, s, s)
    keep = torch.rand(b, 1, s, 1, device=dev) > 0.1
    additive = torch.where(keep, 0.0, float("-inf")).to(torch.bfloat16).expand(b, 1, s, s)
    return {
        "constant along keys, bool (HF5.17 compile)": cols,
        "constant along keys, additive": additive,
        "padding stride0 queries": pad,
        "dense": pad.contiguous(),
    }


def _timed(kernels: dict[str, ModuleType], q, k, v, mask: torch.Tensor) -> dict[str, float]:
    """Error against the float64 reference and do_bench ms of each kernel, and SDPA's ms."""
    from triton.testing import do_bench

    from autokernel import reference

    ref = reference.flash_attention(q.double(), k.double(), v.double(), False, None, mask)
    scale = max(1.0, ref.abs().max().item())
    out: dict[str, float] = {}
    for tag, mod in kernels.items():

        def call(mod: ModuleType = mod) -> torch.Tensor:
            return mod.kernel_fn(q, k, v, False, None, mask)

        out[f"{tag}_err"] = ((call().double() - ref).abs().max() / scale).item()
        out[f"{tag}_ms"] = do_bench(call, warmup=10, rep=50)
    sdpa = lambda: F.scaled_dot_product_attention(q, k, v, attn_mask=mask)
    out["sdpa_ms"] = do_bench(sdpa, warmup=10, rep=50)
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--before", type=Path, required=True, help="the earlier starter's file")
    ap.add_argument("--after", type=Path, default=ROOT / "kernels" / "flash_attention.py")
    ap.add_argument("--json", type=Path, help="write the rows here")
    args = runner.add_arguments(ap).parse_args()
    kernels = {"before": _load("fa_before", args.before), "after": _load("fa_after", args.after)}
    torch.manual_seed(0)
    rows = []
    for b, h, s, d in SHAPES:
        x = torch.randn(b, s, h, d, device="cuda", dtype=torch.bfloat16)
        q = x.transpose(1, 2)
        k, v = (torch.randn_like(x).transpose(1, 2) for _ in range(2))
        for name, mask in _masks(b, s).items():
            row = {"shape": f"{b}x{h}x{s}x{d}", "mask": name, "strides": list(mask.stride())}
            rows.append({**row, **_timed(kernels, q, k, v, mask)})
            print(json.dumps(rows[-1]), flush=True)
    if args.json:
        args.json.write_text(json.dumps(rows, indent=1) + "\n")
    runner.record("fa_mask_layouts", rows, _markdown(rows), commit=args.commit or runner.tree_commit(),
                  results=args.results)  # fmt: skip


def _markdown(rows: list[dict]) -> str:
    lines = ["| shape | mask | strides | before ms | after ms | SDPA ms | err before | err after |",
             "|---|---|---|---:|---:|---:|---:|---:|"]  # fmt: skip
    for r in rows:
        lines.append(
            f"| {r['shape']} | {r['mask']} | {tuple(r['strides'])} | {r['before_ms']:.3f} | "
            f"{r['after_ms']:.3f} | {r['sdpa_ms']:.3f} | {r['before_err']:.2e} | "
            f"{r['after_err']:.2e} |"
        )
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    main()
