"""What the flash_attention starter's mask read compiles to, per mask layout, without a GPU.

Triton's wheel carries the NVIDIA backend, so the starter compiles to sm_90 PTX on a CPU. This
counts, per layout, the memory instructions and barriers in that PTX: a mask read through a
layout Triton cannot vectorise along keys shows up as shared-memory round trips (layout
conversions into the MMA tile) and extra barriers. It is a static figure: it says what the
kernel does, not how long it takes; the timing needs a GPU (benchmarks.models, verify).

The specialisation mirrors Triton's launcher: pointers 16-byte aligned, an integer equal to 1
becomes a constant, others divisible by 16 carry that hint.

    python -m benchmarks.fa_mask_ptx [--kernel kernels/flash_attention.py] [--out t.md]
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import re
from pathlib import Path
from types import ModuleType

import triton
from triton.backends.compiler import GPUTarget
from triton.compiler import ASTSource

import autokernel.launch  # noqa: F401  (sets TRITON_INTERPRET where there is no GPU: before load)
from benchmarks import runner

B, H, S, D = 4, 16, 1024, 64  # BERT-large-ish attention at 4x1024 tokens
QKV_STRIDES = (S * H * D, D, H * D, 1)  # (B, S, H, D) transposed to (B, H, S, D), as HF passes
OUT_STRIDES = (H * S * D, S * D, D, 1)
LAYOUTS = {
    "constant along keys (0, 0, 1, 0)": (0, 0, 1, 0),  # Hugging Face 5.17 under torch.compile
    "padding, expanded (S, 0, 0, 1)": (S, 0, 0, 1),
    "dense (S*S, S*S, S, 1)": (S * S, S * S, S, 1),
}
COUNTED = {
    "ld.global": r"ld\.global[.\w]*",
    "cp.async": r"cp\.async\.c[ag]\.shared\.global",
    "ld.shared": r"ld\.shared[.\w]*",
    "st.shared": r"st\.shared[.\w]*",
    "barriers": r"bar\.sync|barrier\.sync",
}


def load(path: Path) -> ModuleType:
    """The starter with compilable kernels: @triton.jit reads TRITON_INTERPRET when it runs,
    and our launcher sets it where there is no GPU. The variable is restored after, but the
    helper modules the starter imported stay compiled, not interpreted: a process that runs
    kernels in the interpreter must call this in a child process (as the test does)."""
    before = os.environ.get("TRITON_INTERPRET")
    os.environ["TRITON_INTERPRET"] = "0"
    try:
        spec = importlib.util.spec_from_file_location("fa_starter", path)
        mod = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(mod)
    finally:
        if before is None:
            os.environ.pop("TRITON_INTERPRET", None)
        else:
            os.environ["TRITON_INTERPRET"] = before
    return mod


def compile_ptx(mod: ModuleType, mask_strides: tuple[int, ...]) -> str:
    """The starter's kernel for a bf16 call with a bool mask of these strides, as sm_90 PTX."""
    kernel = mod._flash_attention_kernel
    ints = {"n_heads": H, "group": 1, "seq_q": S, "seq_k": S}
    for prefix, strides, dims in (("Q", QKV_STRIDES, "seq dim"), ("K", QKV_STRIDES, "seq dim"),
                                  ("V", QKV_STRIDES, "seq dim"), ("O", OUT_STRIDES, "seq dim"),
                                  ("M", mask_strides, "q k")):  # fmt: skip
        for name, value in zip(("batch", "head", *dims.split()), strides, strict=True):
            ints[f"{prefix}_{name}_stride"] = value
    names = kernel.arg_names
    mode = mod._mask_mode(mask_strides) if "MASK_MODE" in names else True
    consts = {"CAUSAL": False, "MASK_MODE": mode, "HAS_MASK": mode, "MASK_BOOL": True,
              "SPLIT_DIAGONAL": False, "HEAD_DIM": D, "BLOCK_D": D,
              "BLOCK_M": mod.CONFIG["BLOCK_M"], "BLOCK_N": mod.CONFIG["BLOCK_N"],
              "DOT_MODE": "native"}  # fmt: skip
    signature: dict[str, str] = {}
    constexprs: dict[tuple[int], object] = {}
    attrs: dict[tuple[int], list] = {}
    for i, name in enumerate(names):
        if name in consts:
            signature[name], constexprs[(i,)] = "constexpr", consts[name]
        elif name.endswith("_ptr"):
            signature[name] = "*u8" if name == "Mask_ptr" else "*bf16"
            attrs[(i,)] = [["tt.divisibility", 16]]
        elif name == "qk_scale":
            signature[name] = "fp32"
        elif ints[name] == 1:
            signature[name], constexprs[(i,)] = "constexpr", 1
        else:
            signature[name] = "i32"
            if ints[name] % 16 == 0:
                attrs[(i,)] = [["tt.divisibility", 16]]
    src = ASTSource(fn=kernel, signature=signature, constexprs=constexprs, attrs=attrs)
    options = {"num_warps": mod.CONFIG["num_warps"], "num_stages": mod.CONFIG["num_stages"]}
    return triton.compile(src, target=GPUTarget("cuda", 90, 32), options=options).asm["ptx"]


def counts(ptx: str) -> dict[str, int]:
    return {what: len(re.findall(pattern, ptx)) for what, pattern in COUNTED.items()}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--kernel", type=Path, action="append",
                    help="starter file(s) to compare (default: kernels/flash_attention.py)")  # fmt: skip
    ap.add_argument("--out", type=Path, help="also write the markdown table here")
    ap.add_argument("--json", type=Path, help="also write {kernel: {layout: counts}} here")
    args = runner.add_arguments(ap).parse_args()
    kernels = args.kernel or [Path("kernels/flash_attention.py")]
    lines = [f"triton {triton.__version__}, sm_90 PTX, bf16 Q/K/V {B}x{H}x{S}x{D}, bool mask",
             "", "| kernel | mask layout | " + " | ".join(COUNTED) + " | PTX bytes |",
             "|---|---|" + "---:|" * (len(COUNTED) + 1)]  # fmt: skip
    found: dict[str, dict[str, dict[str, int]]] = {}
    rows: list[dict[str, object]] = []
    for path in kernels:
        mod = load(path)
        for label, strides in LAYOUTS.items():
            ptx = compile_ptx(mod, strides)
            row = counts(ptx)
            found.setdefault(str(path), {})[label] = row
            rows.append({"kernel": str(path), "mask": label, **row, "ptx_bytes": len(ptx)})
            lines.append(f"| {path} | {label} | " + " | ".join(str(v) for v in row.values())
                         + f" | {len(ptx)} |")  # fmt: skip
    text = "\n".join(lines)
    print(text)
    if args.out:
        args.out.write_text(text + "\n")
    if args.json:
        args.json.write_text(json.dumps(found, indent=1) + "\n")
    runner.record("fa_mask_ptx", rows, text, commit=args.commit, results=args.results)


if __name__ == "__main__":
    main()
