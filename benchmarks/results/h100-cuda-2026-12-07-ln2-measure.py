"""Old vs new CUDA layernorm starter: correctness against reference.py (float64) at many shapes,
dtypes and views, bitwise determinism, timing against a bf16 device copy of the same bytes, and
the five-stage harness on the new file.

Run from a repository root on the GPU (old file: kernels/cuda/layernorm.py there; new file:
layernorm_new.py beside this script):
    python3 .devrun/ln2/measure.py OUTDIR [--no-harness] [--no-variants] [--dry]
Writes OUTDIR/ln2.md and OUTDIR/ln2.json (also when a step fails: every step is in try/except,
and steps are skipped past DEADLINE_S so the run ends within 150 s). --dry (no GPU needed):
argument handling, the files, and the launch plans of the new file and its variants on an
H100-like device (132 SMs, 227 KB opt-in shared memory), checked against the kernel's
assumptions.
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
DEADLINE_S = 135.0  # steps not started by then are skipped (the caller's timeout is ~150 s)
FILES = {"old": ROOT / "kernels" / "cuda" / "layernorm.py", "new": HERE / "layernorm_new.py"}
# Tuner corners of the new file: CONFIG text -> replacement.
CONFIG_LINE = '"WIDE_THREADS": 1024, "WIDE_ITEMS": 7, "WIDE_CLUSTER": 2'
VARIANTS = {
    "new-c1": '"WIDE_THREADS": 1024, "WIDE_ITEMS": 7, "WIDE_CLUSTER": 1',  # no cluster
    "new-512": '"WIDE_THREADS": 512, "WIDE_ITEMS": 13, "WIDE_CLUSTER": 2',
}
SIZES = [(4096, 50257), (8192, 32000), (16384, 8192), (262144, 128), (4096, 4096)]
ERRORS: list[str] = []


def log(msg: str) -> None:
    print(f"[{time.perf_counter() - T0:6.1f}s] {msg}", flush=True)


def late() -> bool:
    return time.perf_counter() - T0 > DEADLINE_S


def step(name):
    """Run fn, print and record a failure (or a skip past the deadline) instead of raising."""

    def wrap(fn):
        def run(*a, **k):
            if late():
                ERRORS.append(f"{name}: skipped, past {DEADLINE_S:.0f} s")
                log(f"SKIPPED {name}: past the deadline")
                return None
            try:
                return fn(*a, **k)
            except Exception as exc:  # one failure must not stop the rest
                ERRORS.append(f"{name}: {type(exc).__name__}: {exc}")
                log(f"FAILED {name}: {type(exc).__name__}: {exc}")
                traceback.print_exc(limit=3)
                return None

        return run

    return wrap


def source_of(variant: str) -> str:
    if variant in VARIANTS:
        text = FILES["new"].read_text()
        assert CONFIG_LINE in text, f"{variant}: CONFIG line not found in the new file"
        return text.replace(CONFIG_LINE, VARIANTS[variant])
    return FILES[variant].read_text()


def load_module(variant: str) -> types.ModuleType:
    """The kernel file as a fresh module (its own name, so old, new and variants coexist)."""
    name = f"ln2_{variant.replace('-', '_')}"
    path = FILES["new" if variant in VARIANTS else variant]
    spec = importlib.util.spec_from_loader(name, loader=None, origin=str(path))
    mod = importlib.util.module_from_spec(spec)
    mod.__file__ = str(path)
    sys.modules[name] = mod
    exec(compile(source_of(variant), str(path), "exec"), mod.__dict__)
    return mod


@step("prewarm")
def prewarm(variants) -> None:
    """Compile every source at once (nvcc in parallel threads), so the imports hit the cache."""
    import torch

    from autokernel import cuda_build
    from autokernel.harness.guards import literal_assignment

    nvcc = cuda_build.find_nvcc()
    dev = torch.cuda.current_device()

    def one(variant):
        text = source_of(variant)
        src, cfg = literal_assignment(text, "CUDA_SOURCE"), literal_assignment(text, "CONFIG")
        flags = cuda_build.build_flags(cfg, dev)
        key = cuda_build.cache_key(src, flags, cuda_build.nvcc_version(nvcc))
        t = time.perf_counter()
        _, s = cuda_build._cached_or_built(key, src, nvcc, flags)
        return variant, s, time.perf_counter() - t

    with ThreadPoolExecutor(len(variants)) as pool:
        for variant, s, wall in pool.map(one, variants):
            log(f"built {variant}: compile_s={s} wall={wall:.1f}s")


def path_of(mod, rows: int, cols: int, size: int, device) -> str:
    plan = mod.launch_plan(rows, cols, size, mod.CONFIG, device)
    if hasattr(mod, "_ROWS"):  # the new file: _WIDE is {blocks a row: kernel}
        hit = [cl for cl, k in mod._WIDE.items() if plan[0] is k]
        return f"wide{hit[0]}" if hit else "narrow"
    return "wide" if plan[0] is mod._WIDE else "narrow"  # the old: _WIDE is {dtype: kernel}


def inputs(rows, cols, dtype, mode="randn", device="cuda", seed=0):
    import torch

    g = torch.Generator(device="cpu").manual_seed(seed)
    x = torch.randn(rows, cols, generator=g, dtype=torch.float32)
    if mode == "mean10":
        x = 10 + 0.1 * x
    elif mode == "big":
        x = x * 300
    w = torch.randn(cols, generator=g) * 0.5 + 1
    b = torch.randn(cols, generator=g) * 0.1
    return [t.to(device=device, dtype=dtype) for t in (x, w, b)]


def compare(out, args):
    """(ok, max abs error, rel_err): |out - ref| <= atol + rtol * |ref| with the spec's
    tolerances, ref = reference.layernorm in float64 of the same inputs."""
    from autokernel import reference as ref
    from autokernel.specs import get_spec

    r = ref.layernorm(*[a.double() for a in args], 1e-5)
    atol, rtol = get_spec("layernorm").tolerance(args[0].dtype)
    d = (out.double() - r).abs()
    ok = bool(out.shape == r.shape and out.dtype == args[0].dtype and out.isfinite().all()
              and (d <= atol + rtol * r.abs()).all())  # fmt: skip
    return ok, float(d.max()), float(d.max() / r.abs().max().clamp_min(1e-30))


def correctness_cases(full: bool = True):
    """(rows, cols, dtype name, view): odd and tiny widths, both sides of every path's limit,
    strided, offset, 3-D and ill-conditioned rows. full=False: the wide-path cases only."""
    wide = []
    for rows, cols in [(133, 50257), (1, 50257), (300, 32000), (7, 30001), (3, 38000),
                       (5, 40000), (4, 57337), (2, 65536), (2, 65537), (265, 24577),
                       (2, 24576), (67, 50264)]:  # fmt: skip
        for dt in ("bfloat16", "float16"):
            wide.append((rows, cols, dt, "plain"))
    for rows, cols in [(9, 20001), (5, 28000), (4, 50257), (131, 12289), (3, 16000)]:
        wide.append((rows, cols, "float32", "plain"))
    for view in ("strided", "strided16", "offset", "batched3d", "mean10", "big"):
        wide.append((67, 50257, "bfloat16", view))
        wide.append((9, 20001, "float32", view))
    if not full:
        return wide
    cases = []
    for dt in ("bfloat16", "float16", "float32"):
        for rows, cols in [(1, 1), (3, 1), (5, 2), (7, 3), (1, 128), (5, 1023), (33, 4096),
                           (4095, 4097), (3, 1000003), (1000, 7)]:  # fmt: skip
            cases.append((rows, cols, dt, "plain"))
    for view in ("strided", "strided16", "offset", "batched3d", "mean10", "big"):
        cases.append((20, 8192, "bfloat16", view))
        cases.append((31, 1001, "float16", view))
    return cases + wide


def make_case(rows, cols, dtname, view, device="cuda"):
    import torch

    dtype = getattr(torch, dtname)
    mode = view if view in ("mean10", "big") else "randn"
    args = inputs(rows, cols, dtype, mode, device, seed=rows * 7 + cols)
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
    """Each case run three times (bitwise equal: deterministic); on the narrow path the new
    file should also match the old bit for bit (same kernel arithmetic, same order)."""
    import torch

    dev = torch.device("cuda")
    for variant, mod in mods.items():
        if mod is None or variant == "old" or late():
            continue
        bad, cases = 0, correctness_cases(full=variant == "new")
        for rows, cols, dtname, view in cases:
            label = f"{variant} {rows}x{cols} {dtname} {view}"
            same_old = None
            try:
                args = make_case(rows, cols, dtname, view)
                outs = [mod.kernel_fn(*args) for _ in range(3)]
                torch.cuda.synchronize()
                ok, err, rel = compare(outs[0], args)
                det = all(torch.equal(outs[0], o) for o in outs[1:])
                path = path_of(mod, args[0].numel() // cols, cols, args[0].element_size(), dev)
                if mods.get("old") is not None:
                    same_old = bool(torch.equal(outs[0], mods["old"].kernel_fn(*args)))
            except Exception as exc:
                ok, err, rel, det, path = False, float("nan"), float("nan"), False, f"error {exc}"
            if not (ok and det):
                bad += 1
                log(f"WRONG {label}: ok={ok} err={err:.2e} deterministic={det} {path}")
            results.append({"variant": variant, "case": f"{rows}x{cols}", "dtype": dtname,
                            "view": view, "path": path, "ok": ok, "deterministic": det,
                            "max_abs_err": err, "rel_err": rel,
                            "same_as_old": same_old})  # fmt: skip
        log(f"correctness {variant}: {len(cases)} cases, {bad} wrong or non-deterministic")


@step("timing")
def timing(mods, rows_out):
    import torch

    from autokernel.timing import measure

    dev = torch.device("cuda")
    for rows, cols in SIZES:
        if late():
            ERRORS.append(f"timing {rows}x{cols}: skipped, past the deadline")
            continue
        args = inputs(rows, cols, torch.bfloat16)
        dst = torch.empty_like(args[0])
        copy_us = measure(lambda d=dst, s=args[0]: d.copy_(s), True).median_us
        size = f"{rows}x{cols}"
        rows_out.append({"variant": "copy", "size": size, "us": copy_us, "pct": 100.0,
                         "rel_err": None, "ok": True, "path": ""})  # fmt: skip
        for variant, mod in mods.items():
            if mod is None:
                continue
            try:
                out = mod.kernel_fn(*args)
                ok, _, rel = compare(out, args)
                us = measure(lambda m=mod, a=args: m.kernel_fn(*a), True).median_us
                path = path_of(mod, rows, cols, 2, dev)
            except Exception as exc:
                log(f"FAILED timing {variant} {size}: {exc}")
                us, ok, rel, path = float("nan"), False, float("nan"), "error"
            rows_out.append({"variant": variant, "size": size, "us": us,
                             "pct": 100 * copy_us / us, "rel_err": rel, "ok": ok,
                             "path": path})  # fmt: skip
            log(f"{variant:8s} {size:12s} {us:9.2f} us {100 * copy_us / us:6.1f} % of copy "
                f"({copy_us:.2f} us) rel_err={rel:.2e} ok={ok} {path}")  # fmt: skip
        del args, dst
        torch.cuda.empty_cache()


@step("harness")
def harness(quick, verdicts):
    from autokernel.harness.sandbox import Options, evaluate

    t = time.perf_counter()
    budget = max(20.0, min(90.0, 140.0 - (t - T0)))
    v = evaluate(FILES["new"], Options(timeout_s=budget, quick=quick, compile_baseline=False,
                                       prestart=False))  # fmt: skip
    verdicts.append({"status": v.status.name, "message": v.message, "quick": quick,
                     "seconds": round(time.perf_counter() - t, 1)})  # fmt: skip
    log(f"VERDICT layernorm_new: {v.status.name} {v.message} ({time.perf_counter() - t:.1f}s)")


def table(rows) -> str:
    lines = ["| variant | size | µs | % of copy | rel_err | ok | path |",
             "|---|---|---|---|---|---|---|"]  # fmt: skip
    for r in rows:
        rel = "" if r["rel_err"] is None else f"{r['rel_err']:.2e}"
        lines.append(f"| {r['variant']} | {r['size']} | {r['us']:.2f} | {r['pct']:.1f} | {rel} | "
                     f"{'yes' if r['ok'] else 'NO'} | {r['path']} |")  # fmt: skip
    return "\n".join(lines)


def check_plan(mod, rows, cols, size, plan) -> None:
    """What the new kernels assume of a plan (see layernorm_wide and launch_plan)."""
    cfg, vec = mod.CONFIG, 16 // size
    nvec = -(-cols // vec) + (cols % vec != 0)  # the most vectors a row can span
    kernel, grid, block, *extra, shared = plan
    if kernel is mod._ROWS:
        return
    (cl,) = [c for c, k in mod._WIDE.items() if k is kernel]
    part = extra[0]
    assert block == cfg["WIDE_THREADS"] and grid % cl == 0 and grid // cl <= max(rows, 1)
    assert part * cl >= nvec and -(-part // block) <= -(-cfg["WIDE_ITEMS"] // cl)
    assert shared == (3 * part + 2) * 16 and shared + 1024 <= 232448
    assert nvec > cfg["MAX_THREADS"] * cfg["ITEMS"], "narrow rows stay on the narrow path"


def dry(out: Path) -> int:
    """No GPU: the files, and the plans the new file and its variants choose on an H100."""
    import torch

    from autokernel import cuda_build
    from autokernel.harness.cuda_check import tokenize
    from autokernel.harness.cuda_source import entry_points
    from autokernel.harness.guards import literal_assignment

    for variant, path in FILES.items():
        print(f"{variant}: {path} exists={path.exists()}")
    real_load, real_props = cuda_build.load, torch.cuda.get_device_properties

    def fake_load(src, cfg=None):
        names = [e.name for e in entry_points(tokenize(src))]
        return types.SimpleNamespace(**{n: types.SimpleNamespace(name=n) for n in names})

    cuda_build.load = fake_load
    props = types.SimpleNamespace(multi_processor_count=132, shared_memory_per_block_optin=232448)
    torch.cuda.get_device_properties = lambda d=None: props
    lines, n = [], 0
    try:
        for variant in ("old", "new", *VARIANTS):
            mod = load_module(variant)
            assert literal_assignment(source_of(variant), "CONFIG") == mod.CONFIG
            for rows, cols in [*SIZES, (1, 1), (4095, 4097), (3, 38000), (5, 40000),
                               (2, 65537), (9, 20001), (1, 50257)]:  # fmt: skip
                for dt in (torch.bfloat16, torch.float16, torch.float32):
                    plan = mod.launch_plan(rows, cols, dt.itemsize, mod.CONFIG, "cuda")
                    if hasattr(mod, "_ROWS"):
                        check_plan(mod, rows, cols, dt.itemsize, plan)
                        n += 1
                    path = path_of(mod, rows, cols, dt.itemsize, "cuda")
                    lines.append(f"{variant} {rows}x{cols} {dt}: {path} {plan[1:]}")
        print("\n".join(lines))
        print(
            f"{n} plans checked; {len(correctness_cases())} correctness cases for new, "
            f"{len(correctness_cases(False))} a variant; sizes {SIZES}"
        )
    finally:
        cuda_build.load, torch.cuda.get_device_properties = real_load, real_props
    out.mkdir(parents=True, exist_ok=True)
    (out / "ln2.md").write_text("dry run: no GPU\n\n" + "\n".join(lines) + "\n")
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
    prewarm(variants)
    mods = {v: step(f"load {v}")(load_module)(v) for v in variants}
    results: list[dict] = []
    rows: list[dict] = []
    verdicts: list[dict] = []
    # The harness (a cold build in its sandbox, then its stages) runs beside the correctness
    # cases, and is waited for before the timing, which has the GPU to itself.
    pool = ThreadPoolExecutor(1)
    pending = None if args.no_harness else pool.submit(harness, not args.full_harness, verdicts)
    correctness(mods, results)
    if pending is not None:
        pending.result()
    pool.shutdown()
    timing(mods, rows)
    write(args.outdir, gpu, rows, results, verdicts)
    log("done")
    return 0


def write(outdir: Path, gpu: str, rows, results, verdicts) -> None:
    import torch

    wrong = [r for r in results if not (r["ok"] and r["deterministic"])]
    narrow = [r for r in results if r["variant"] == "new" and r["path"] == "narrow"]
    differ = [r for r in narrow if r["same_as_old"] is False]
    md = [f"# CUDA layernorm, old vs new ({gpu})", "",
          f"torch {torch.__version__}; autokernel.timing median (L2 flushed), bf16; copy: a "
          "device copy of the same bytes; timed with the GPU to itself (the harness ran "
          "beside the correctness cases, before).", "",
          table(rows), "",
          f"Correctness: {len(results)} cases (new: fp16/bf16/fp32, N=1, odd widths, "
          f"4095x4097, strided, offset, 3-D, mean 10 std 0.1, large values; variants: the "
          f"wide-path cases; each run three times): {len(wrong)} wrong or non-deterministic. "
          f"Narrow-path cases bitwise equal to the old file: {len(narrow) - len(differ)} of "
          f"{len(narrow)}.", ""]  # fmt: skip
    md += [f"- WRONG {r}" for r in wrong[:40]]
    md += [f"- narrow, differs from old: {r}" for r in differ[:10]]
    md += ["", "Five stages of the new file:"]
    md += [f"- {v['status']} {v['message']} (quick={v['quick']}, {v['seconds']} s)"
           for v in verdicts]  # fmt: skip
    md += (["", "Errors:"] + [f"- {e}" for e in ERRORS]) if ERRORS else []
    text = "\n".join(md) + "\n"
    (outdir / "ln2.md").write_text(text)
    (outdir / "ln2.json").write_text(json.dumps(
        {"gpu": gpu, "torch": torch.__version__, "timing": rows, "correctness": results,
         "verdicts": verdicts, "errors": ERRORS, "seconds": time.perf_counter() - T0},
        indent=1, default=str))  # fmt: skip
    print(text)


if __name__ == "__main__":
    sys.exit(main())
