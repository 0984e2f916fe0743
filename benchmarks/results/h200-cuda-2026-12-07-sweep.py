"""CUDA row-kernel variants on the GPU: each a copy of kernels/cuda/<kind>.py with text
substitutions (CONFIG corners, cache hints, launch bounds), built in parallel, checked against
float64 at the spec's bench sizes (bf16), and timed with do_bench beside a copy of the same bytes.

    python3 .devrun/sw/sweep.py OUTDIR [--deadline S] [--kinds layernorm,rmsnorm]
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import time
import traceback
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

ROOT = Path(os.getcwd())
sys.path.insert(0, str(ROOT))
import torch  # noqa: E402
import triton  # noqa: E402

from autokernel import cuda_build  # noqa: E402
from autokernel.harness.guards import literal_assignment  # noqa: E402
from autokernel.harness.stages import to_float64  # noqa: E402
from autokernel.kernel_file import import_file  # noqa: E402
from autokernel.specs import get_spec  # noqa: E402

T0 = time.perf_counter()
CFG = {"layernorm": '{"ITEMS": 6, "MAX_THREADS": 512, "NARROW_BLOCK": 256, "SMEM_KB": 96,',
       "rmsnorm": '{"ITEMS": 6, "MAX_THREADS": 512, "NARROW_BLOCK": 256, "SMEM_KB": 96,',
       "softmax": '{"ITEMS": 6, "MAX_THREADS": 512, "NARROW_BLOCK": 256, "SMEM_KB": 96}'}


def cfg(kind, items=6, mt=512, nb=256):
    end = "}" if kind == "softmax" else ","
    return (CFG[kind], f'{{"ITEMS": {items}, "MAX_THREADS": {mt}, "NARROW_BLOCK": {nb}, "SMEM_KB": 96{end}')


LB1 = ("#define MIN_BLOCKS (1024 / BOUND)", "#define MIN_BLOCKS 1")
CS_LOAD = ("if (k < r.nvec) reg[s] = __ldg(r.xv + k);", "if (k < r.nvec) reg[s] = __ldcs(r.xv + k);")
CS_STORE = ("yv[k] = Cvt<T>::pack(f);", "__stcs(yv + k, Cvt<T>::pack(f));")


def variants(kind):
    v = {"base": []}
    for items in (2, 4, 8):
        v[f"i{items}"] = [cfg(kind, items=items)]
    for nb in (128, 512):
        v[f"nb{nb}"] = [cfg(kind, nb=nb)]
    for mt in (256, 1024):
        v[f"mt{mt}"] = [cfg(kind, mt=mt)]
    v["i4mt1024"] = [cfg(kind, items=4, mt=1024)]
    v["i8mt256"] = [cfg(kind, items=8, mt=256)]
    v["lb1"] = [LB1]
    for n, blocks in (("lb3", 1536), ("lb4", 2048)):
        lb = (LB1[0], f"#define MIN_BLOCKS ({blocks} / BOUND)")
        v[n] = [lb]
        v[f"i4{n}"] = [cfg(kind, items=4), lb]
        v[f"i2{n}"] = [cfg(kind, items=2), lb]
    if kind == "layernorm":
        v["cs"] = [CS_LOAD, CS_STORE]
        v["csl"] = [CS_LOAD]
        v["cs_lb1"] = [CS_LOAD, CS_STORE, LB1]
        v["i4cs"] = [cfg(kind, items=4), CS_LOAD, CS_STORE]
        v["ws2"] = [('"WIDE_STAGES": 1, "WIDE_PARAMS": 2', '"WIDE_STAGES": 2, "WIDE_PARAMS": 2')]
        v["wp1"] = [('"WIDE_STAGES": 1, "WIDE_PARAMS": 2', '"WIDE_STAGES": 1, "WIDE_PARAMS": 1')]
        v["wt512"] = [('"WIDE_THREADS": 1024, "WIDE_ITEMS": 7', '"WIDE_THREADS": 512, "WIDE_ITEMS": 13')]
    return v


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("out", type=Path)
    ap.add_argument("--deadline", type=float, default=200)
    ap.add_argument("--kinds", default="layernorm,rmsnorm,softmax")
    a = ap.parse_args()
    a.out.mkdir(parents=True, exist_ok=True)
    tmp = a.out / "files"
    tmp.mkdir(exist_ok=True)
    files = {}
    for kind in a.kinds.split(","):
        base = (ROOT / "kernels" / "cuda" / f"{kind}.py").read_text()
        for name, subs in variants(kind).items():
            text = base
            for old, new in subs:
                assert text.count(old) >= 1, (kind, name, old)
                text = text.replace(old, new)
            p = tmp / f"{kind}_{name}.py"
            p.write_text(text)
            files[(kind, name)] = p

    def build(p):
        text = p.read_text()
        t = time.perf_counter()
        cuda_build.load(literal_assignment(text, "CUDA_SOURCE"), literal_assignment(text, "CONFIG"))
        return time.perf_counter() - t

    errs = {}
    with ThreadPoolExecutor(12) as pool:
        futs = {k: pool.submit(build, p) for k, p in files.items()}
    for k, f in futs.items():
        try:
            f.result()
        except Exception as exc:
            errs[k] = f"{type(exc).__name__}: {str(exc)[:400]}"
            print("BUILD FAIL", k, errs[k], flush=True)
    print(f"[{time.perf_counter()-T0:.0f}s] built {len(files)} ({len(errs)} failed)", flush=True)
    rows = []
    copies = {}
    for kind in a.kinds.split(","):
        spec = get_spec(kind)
        for size in spec.gpu.bench:
            gen = torch.Generator(device="cuda").manual_seed(0)
            inputs = spec.make_inputs(size, torch.bfloat16, gen, torch.device("cuda"))
            ref = spec.reference(*to_float64(inputs))
            nbytes = spec.bytes_moved(size, torch.bfloat16)
            n = int(nbytes // 4)
            if n not in copies:
                src = torch.empty(n, dtype=torch.bfloat16, device="cuda")
                dst = torch.empty_like(src)
                copies[n] = triton.testing.do_bench(lambda: dst.copy_(src), return_mode="median")
                del src, dst
            cu = copies[n]
            for (k2, name), p in files.items():
                if k2 != kind or (k2, name) in errs:
                    continue
                if time.perf_counter() - T0 > a.deadline:
                    print("deadline", flush=True)
                    break
                try:
                    mod = import_file(p, f"sw_{kind}_{name}")
                    out = mod.kernel_fn(*inputs)
                    out2 = mod.kernel_fn(*inputs)
                    scale = ref.abs().max().clamp_min(1e-30)
                    err = float((out.double() - ref).abs().max() / scale)
                    same = bool(torch.equal(out, out2))
                    ms = triton.testing.do_bench(lambda: mod.kernel_fn(*inputs), return_mode="median")
                    r = {"kind": kind, "variant": name, "size": spec.label(size), "us": ms * 1e3,
                         "copy_us": cu * 1e3, "pct": 100 * cu / ms, "rel_err": err, "deterministic": same}
                except Exception as exc:
                    r = {"kind": kind, "variant": name, "size": spec.label(size), "error": f"{type(exc).__name__}: {exc}"[:300]}
                    traceback.print_exc(limit=2)
                rows.append(r)
                print(json.dumps(r), flush=True)
            del inputs, ref
            torch.cuda.empty_cache()
    (a.out / "sweep.json").write_text(json.dumps({"gpu": torch.cuda.get_device_name(), "torch": torch.__version__,
        "triton": triton.__version__, "rows": rows, "build_errors": {f"{k[0]}_{k[1]}": v for k, v in errs.items()}}, indent=1))
    lines = ["| kind | size | variant | us | % copy | rel_err | det |", "|---|---|---|---|---|---|---|"]
    for r in rows:
        if "error" in r:
            lines.append(f"| {r['kind']} | {r['size']} | {r['variant']} | ERROR {r['error'][:80]} | | | |")
        else:
            lines.append(f"| {r['kind']} | {r['size']} | {r['variant']} | {r['us']:.2f} | {r['pct']:.1f} | {r['rel_err']:.2e} | {r['deterministic']} |")
    (a.out / "sweep.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))


main()
