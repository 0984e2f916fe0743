# The script behind the results file of the same prefix, as it ran on the GPU (ruff's fixes
# and formatting applied since, and reference imported through the package).
"""Old vs new CUDA rmsnorm/layernorm starters: correctness against reference.py (float64),
timing against a bf16 device copy of the same bytes, and the five-stage harness on the new files.

Run from the repository root (old starters in kernels/cuda/, new ones beside this file):
    python3 .devrun/cudanorm/measure.py OUTDIR [--full-harness] [--no-harness] [--dry]
Writes OUTDIR/cudanorm.md and OUTDIR/cudanorm.json. Every step is in try/except: one failure is
printed and the rest still run. --dry (works without a GPU): argument handling, the files, the
launch plans the new files pick on an H100-like device (132 SMs, 227 KB opt-in shared memory).
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import sys
import time
import traceback
import types
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

ROOT = Path(os.getcwd())
sys.path.insert(0, str(ROOT))
HERE = Path(__file__).resolve().parent
T0 = time.perf_counter()
FILES = {
    ("rmsnorm", "old"): ROOT / "kernels" / "cuda" / "rmsnorm.py",
    ("layernorm", "old"): ROOT / "kernels" / "cuda" / "layernorm.py",
    ("rmsnorm", "new"): HERE / "rmsnorm_new.py",
    ("layernorm", "new"): HERE / "layernorm_new.py",
}
# A tuner corner of the new files: 512-thread blocks, 13 register slots (128 registers).
VARIANTS = {
    "new-512": ('"WIDE_THREADS": 1024, "WIDE_ITEMS": 7', '"WIDE_THREADS": 512, "WIDE_ITEMS": 13')
}
SIZES = [(4096, 50257), (16384, 8192), (262144, 128), (4096, 4096), (8192, 32000)]
ERRORS: list[str] = []


def log(msg: str) -> None:
    print(f"[{time.perf_counter() - T0:6.1f}s] {msg}", flush=True)


def step(name):
    """Run fn, print and record a failure instead of raising."""

    def wrap(fn):
        def run(*a, **k):
            try:
                return fn(*a, **k)
            except Exception as exc:
                ERRORS.append(f"{name}: {type(exc).__name__}: {exc}")
                log(f"FAILED {name}: {type(exc).__name__}: {exc}")
                traceback.print_exc(limit=3)
                return None

        return run

    return wrap


def source_of(kind: str, variant: str) -> str:
    if variant in VARIANTS:
        old, new = VARIANTS[variant]
        text = FILES[(kind, "new")].read_text()
        assert old in text, f"{variant}: CONFIG line not found"
        return text.replace(old, new)
    return FILES[(kind, variant)].read_text()


def load_module(kind: str, variant: str) -> types.ModuleType:
    """The kernel file as a fresh module (its own name, so old and new coexist)."""
    name = f"cudanorm_{kind}_{variant.replace('-', '_')}"
    path = FILES[(kind, "new" if variant in VARIANTS else variant)]
    spec = importlib.util.spec_from_loader(name, loader=None, origin=str(path))
    mod = importlib.util.module_from_spec(spec)
    mod.__file__ = str(path)
    sys.modules[name] = mod
    exec(compile(source_of(kind, variant), str(path), "exec"), mod.__dict__)
    return mod


@step("prewarm")
def prewarm(keys) -> None:
    """Compile every source at once (nvcc runs in parallel threads), so imports hit the cache."""
    import torch

    from autokernel import cuda_build
    from autokernel.harness.guards import literal_assignment

    nvcc = cuda_build.find_nvcc()
    dev = torch.cuda.current_device()

    def one(key):
        text = source_of(*key)
        src, cfg = literal_assignment(text, "CUDA_SOURCE"), literal_assignment(text, "CONFIG")
        flags = cuda_build.build_flags(cfg, dev)
        ck = cuda_build.cache_key(src, flags, cuda_build.nvcc_version(nvcc))
        t = time.perf_counter()
        _, s = cuda_build._cached_or_built(ck, src, nvcc, flags)
        return key, s, time.perf_counter() - t

    with ThreadPoolExecutor(len(keys)) as pool:
        for key, s, wall in pool.map(one, keys):
            log(f"built {key}: compile_s={s} wall={wall:.1f}s")


def inputs(kind, rows, cols, dtype, mode="randn", device="cuda", seed=0):
    import torch

    g = torch.Generator(device="cpu").manual_seed(seed)
    x = torch.randn(rows, cols, generator=g, dtype=torch.float32)
    if mode == "mean10":
        x = 10 + 0.1 * x
    elif mode == "big":
        x = x * 300
    w = torch.randn(cols, generator=g) * 0.5 + 1
    b = torch.randn(cols, generator=g) * 0.1
    x, w, b = (t.to(device=device, dtype=dtype) for t in (x, w, b))
    return (x, w) if kind == "rmsnorm" else (x, w, b)


def reference(kind, args):
    from autokernel import reference as ref

    d = [a.double() for a in args]
    return ref.rmsnorm(*d, 1e-6) if kind == "rmsnorm" else ref.layernorm(*d, 1e-5)


def tolerance(dtype):
    import torch

    return {torch.float32: 1e-4, torch.float16: 2e-3, torch.bfloat16: 1.6e-2}[dtype]


def compare(kind, out, args):
    """(ok, rel_err): elementwise |out - ref| <= tol * (1 + |ref|), rel_err max|d| / max|ref|."""
    r = reference(kind, args)
    d = (out.double() - r).abs()
    ok = bool(out.shape == r.shape and out.dtype == args[0].dtype and torch_finite(out)
              and (d <= tolerance(args[0].dtype) * (1 + r.abs())).all())  # fmt: skip
    return ok, float(d.max() / r.abs().max().clamp_min(1e-30))


def torch_finite(t):
    return bool(t.isfinite().all())


def path_of(mod, x2shape, cols, dtype, device):
    try:
        plan = mod.launch_plan(x2shape, cols, dtype.itemsize, mod.CONFIG, device)
        return "wide" if plan[0] is mod._WIDE else "narrow"
    except AttributeError:
        return "narrow"  # the old files have one path


def correctness_cases():
    """(kind-independent) cases: (label, rows, cols, dtype name, how the input is viewed)."""
    cases = []
    for dt in ("bfloat16", "float16", "float32"):
        for rows, cols in [(1, 128), (5, 1023), (33, 4096), (3, 1000003)]:
            cases.append((rows, cols, dt, "plain"))
    for rows, cols in [(133, 50257), (300, 32000), (7, 30001), (4, 57336), (4, 57337),
                       (1, 50257), (265, 24577), (2, 24576)]:  # fmt: skip
        for dt in ("bfloat16", "float16"):
            cases.append((rows, cols, dt, "plain"))
    for rows, cols in [(9, 100003), (16, 20001), (5, 28000), (4, 50257), (3, 12289)]:
        cases.append((rows, cols, "float32", "plain"))
    for view in ("strided", "strided16", "offset", "batched3d", "mean10", "big"):
        cases.append((67, 50257, "bfloat16", view))
        cases.append((20, 8192, "bfloat16", view))
        cases.append((9, 20001, "float32", view))
    return cases


def make_case(kind, rows, cols, dtname, view, device="cuda"):
    import torch

    dtype = getattr(torch, dtname)
    mode = view if view in ("mean10", "big") else "randn"
    args = list(inputs(kind, rows, cols, dtype, mode, device, seed=rows * 7 + cols))
    x = args[0]
    if view in ("strided", "strided16"):  # +13: rows off y's alignment (copied); +16 bytes: used
        pad = 13 if view == "strided" else 16 // x.element_size()  # as they are, stride != cols
        buf = torch.zeros(rows, cols + pad, dtype=dtype, device=device)
        buf[:, :cols] = x
        x = buf[:, :cols]
    elif view == "offset":  # a view one element into its storage (not 16-byte aligned)
        buf = torch.zeros(rows * cols + 1, dtype=dtype, device=device)
        buf[1:] = x.reshape(-1)
        x = buf[1:].view(rows, cols)
    elif view == "batched3d":
        x = x.reshape(1, rows, cols).expand(2, rows, cols).contiguous()
    args[0] = x
    return args


@step("correctness")
def correctness(mods, results):
    import torch

    dev = torch.device("cuda")
    for kind in ("rmsnorm", "layernorm"):
        for variant, mod in mods.items():
            if mod is None or mod.KERNEL_TYPE != kind:
                continue
            bad = 0
            cases = correctness_cases()
            for rows, cols, dtname, view in cases:
                label = f"{kind} {variant} {rows}x{cols} {dtname} {view}"
                try:
                    args = make_case(kind, rows, cols, dtname, view)
                    out = mod.kernel_fn(*args)
                    again = mod.kernel_fn(*args)
                    torch.cuda.synchronize()
                    ok, rel = compare(kind, out, args)
                    det = bool(torch.equal(out, again))
                    x2rows = args[0].numel() // cols
                    path = path_of(mod, x2rows, cols, args[0].dtype, dev)
                except Exception as exc:
                    ok, rel, det, path = False, float("nan"), False, f"error {exc}"
                if not (ok and det):
                    bad += 1
                    log(f"WRONG {label}: ok={ok} rel_err={rel:.2e} deterministic={det} {path}")
                results.append({"type": kind, "variant": variant, "case": f"{rows}x{cols}",
                                "dtype": dtname, "view": view, "path": path, "ok": ok,
                                "deterministic": det, "rel_err": rel})  # fmt: skip
            if cases:
                log(f"correctness {kind} {variant}: {len(cases)} cases, {bad} wrong")


@step("timing")
def timing(mods, rows_out):
    import torch

    from autokernel.timing import measure

    dev = torch.device("cuda")
    for rows, cols in SIZES:
        args = {k: inputs(k, rows, cols, torch.bfloat16) for k in ("rmsnorm", "layernorm")}
        src = args["rmsnorm"][0]
        dst = torch.empty_like(src)
        copy_us = measure(lambda d=dst, s=src: d.copy_(s), True).median_us
        size = f"{rows}x{cols}"
        rows_out.append({"type": "copy", "variant": "copy", "size": size, "us": copy_us,
                         "pct": 100.0, "rel_err": None, "ok": True, "path": ""})  # fmt: skip
        for kind in ("rmsnorm", "layernorm"):
            for variant, mod in mods.items():
                if mod is None or mod.KERNEL_TYPE != kind:
                    continue
                try:
                    a = args[kind]
                    out = mod.kernel_fn(*a)
                    ok, rel = compare(kind, out, a)
                    us = measure(lambda m=mod, a=a: m.kernel_fn(*a), True).median_us
                    path = path_of(mod, rows, cols, torch.bfloat16, dev)
                except Exception as exc:
                    log(f"FAILED timing {kind} {variant} {size}: {exc}")
                    us, ok, rel, path = float("nan"), False, float("nan"), "error"
                rows_out.append({"type": kind, "variant": variant, "size": size, "us": us,
                                 "pct": 100 * copy_us / us, "rel_err": rel, "ok": ok,
                                 "path": path})  # fmt: skip
                log(f"{kind:9s} {variant:8s} {size:12s} {us:9.2f} us {100 * copy_us / us:6.1f} % "
                    f"of copy ({copy_us:.2f} us) rel_err={rel:.2e} ok={ok} {path}")  # fmt: skip


@step("harness")
def harness(kind, quick, verdicts):
    from autokernel.harness.sandbox import Options, evaluate

    t = time.perf_counter()
    path = FILES[(kind, "new")]
    v = evaluate(path, Options(timeout_s=110, quick=quick, compile_baseline=False, prestart=False))
    line = f"{kind}_new: {v.status.name} {v.message}"
    verdicts.append({"type": kind, "status": v.status.name, "message": v.message,
                     "quick": quick, "seconds": round(time.perf_counter() - t, 1),
                     "build_s": getattr(v, "build_s", None)})  # fmt: skip
    log(f"VERDICT {line} ({time.perf_counter() - t:.1f}s)")


def table(rows) -> str:
    lines = ["| type | variant | size | µs | % of copy | rel_err | ok | path |",
             "|---|---|---|---|---|---|---|---|"]  # fmt: skip
    for r in rows:
        rel = "" if r["rel_err"] is None else f"{r['rel_err']:.2e}"
        lines.append(f"| {r['type']} | {r['variant']} | {r['size']} | {r['us']:.2f} | "
                     f"{r['pct']:.1f} | {rel} | {'yes' if r['ok'] else 'NO'} | {r['path']} |")  # fmt: skip
    return "\n".join(lines)


def dry(out: Path) -> int:
    """No GPU: the files and the plans the new files choose on an H100-like device."""
    import torch

    from autokernel import cuda_build

    for key, path in FILES.items():
        print(f"{key}: {path} exists={path.exists()}")
    real_load = cuda_build.load
    cuda_build.load = lambda src, cfg=None: types.SimpleNamespace(**{
        n: f"kernel {n}" for n in ("rmsnorm_f16", "rmsnorm_bf16", "rmsnorm_f32",
        "rmsnorm_wide_f16", "rmsnorm_wide_bf16", "rmsnorm_wide_f32", "layernorm_f16",
        "layernorm_bf16", "layernorm_f32", "layernorm_wide_f16", "layernorm_wide_bf16",
        "layernorm_wide_f32")})  # fmt: skip
    props = types.SimpleNamespace(multi_processor_count=132, shared_memory_per_block_optin=232448)
    real_props = torch.cuda.get_device_properties
    torch.cuda.get_device_properties = lambda d=None: props
    try:
        for variant in ("new", *VARIANTS):
            for kind in ("rmsnorm", "layernorm"):
                mod = load_module(kind, variant)
                for rows, cols in [*SIZES, (4, 50257), (4, 57336), (4, 57337)]:
                    for dt in (torch.bfloat16, torch.float32):
                        plan = mod.launch_plan(rows, cols, dt.itemsize, mod.CONFIG, "cuda")
                        path = "wide" if plan[0] is mod._WIDE else "narrow"
                        print(f"{kind} {variant} {rows}x{cols} {dt}: {path} {plan[1:]}")
                cases = correctness_cases()
        print(f"{len(cases)} correctness cases a file; sizes {SIZES}")
    finally:
        cuda_build.load = real_load
        torch.cuda.get_device_properties = real_props
    out.mkdir(parents=True, exist_ok=True)
    (out / "cudanorm.md").write_text("dry run: no GPU\n")
    print("dry run done")
    return 0


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("outdir", type=Path)
    ap.add_argument("--dry", action="store_true", help="no GPU: check files and plans only")
    ap.add_argument("--full-harness", action="store_true", help="harness without --quick")
    ap.add_argument("--no-harness", action="store_true")
    ap.add_argument("--no-variants", action="store_true")
    args = ap.parse_args()
    if args.dry:
        return dry(args.outdir)
    import torch

    if not torch.cuda.is_available():
        print("no GPU here: use --dry", file=sys.stderr)
        return 2
    args.outdir.mkdir(parents=True, exist_ok=True)
    gpu = torch.cuda.get_device_name()
    log(f"{gpu}, torch {torch.__version__}, cwd {ROOT}")
    variants = ["old", "new"] + ([] if args.no_variants else list(VARIANTS))
    keys = [(k, v) for v in variants for k in ("rmsnorm", "layernorm")]
    prewarm(keys)
    mods = {}
    for kind, variant in keys:
        mod = step(f"load {kind} {variant}")(load_module)(kind, variant)
        mods[f"{variant}:{kind}"] = mod
    results: list[dict] = []
    rows: list[dict] = []
    verdicts: list[dict] = []
    correctness({k: m for k, m in mods.items() if not k.startswith("old:")}, results)
    timing(mods, rows)
    for r in rows + results:
        r["variant"] = r["variant"].split(":")[0]
    if not args.no_harness:  # both at once (each builds cold in its sandbox): their µs are rough
        with ThreadPoolExecutor(2) as pool:
            list(
                pool.map(
                    lambda k: harness(k, not args.full_harness, verdicts), ("rmsnorm", "layernorm")
                )
            )
    wrong = [r for r in results if not (r["ok"] and r["deterministic"])]
    md = [f"# CUDA rmsnorm/layernorm, old vs new ({gpu})", "",
          f"torch {torch.__version__}; do_bench median (L2 flushed), bf16; copy: a device copy "
          "of the same bytes.", "", table(rows), "",
          f"Correctness: {len(results)} cases of the new files (fp16/bf16/fp32, odd widths, "
          f"strided, offset, 3-D, mean 10 std 0.1, large values; each run twice for "
          f"determinism): {len(wrong)} wrong or non-deterministic.", ""]  # fmt: skip
    md += [f"- WRONG {r}" for r in wrong[:40]]
    md += ["", "Five stages (the two files evaluated concurrently, so their timings are rough):"]
    md += [f"- {v['type']}_new: {v['status']} {v['message']} (quick={v['quick']}, "
           f"{v['seconds']} s)" for v in verdicts]  # fmt: skip
    md += (["", "Errors:"] + [f"- {e}" for e in ERRORS]) if ERRORS else []
    text = "\n".join(md) + "\n"
    (args.outdir / "cudanorm.md").write_text(text)
    (args.outdir / "cudanorm.json").write_text(json.dumps(
        {"gpu": gpu, "torch": torch.__version__, "timing": rows, "correctness": results,
         "verdicts": verdicts, "errors": ERRORS, "seconds": time.perf_counter() - T0},
        indent=1, default=str))  # fmt: skip
    print(text)
    log("done")
    return 0


if __name__ == "__main__":
    sys.exit(main())
