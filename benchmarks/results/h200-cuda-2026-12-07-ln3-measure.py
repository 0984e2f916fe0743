"""Old vs new CUDA layernorm starter (issue 17, round 3): correctness against reference.py (float64)
at many shapes, dtypes and views, bitwise determinism, timing against a device copy of the same
bytes (triton.testing.do_bench median, L2 flushed), and the five-stage harness on the new file.

Run from a repository root on the GPU (the worktree of branch ln-wide, or main):
    python3 .devrun/ln3/measure.py OUTDIR [--no-harness] [--no-variants] [--dry [--no-ptxas]]
Files: new = layernorm_new.py beside this script (the candidate, as committed); old =
kernels/cuda/layernorm.py of the repository root it runs in, unless that is the new file itself
(run from the ln-wide worktree), then layernorm_old.py beside this script (main's file, f2c9808).
Writes OUTDIR/ln3.md and OUTDIR/ln3.json, also when steps fail: every step is in try/except and
steps not started by DEADLINE_S are skipped, so the run ends within 150 s.
--dry (no GPU): argument handling, the files, the launch plans of old, new and the variants on
an H100 (132 SMs, 227 KB opt-in shared memory, 64K registers an SM) checked against the kernel's
shared-memory layout, and (unless --no-ptxas) ptxas's registers and spills for sm_90a.
"""

from __future__ import annotations

import argparse
import hashlib
import importlib.util
import json
import os
import re
import subprocess
import sys
import tempfile
import time
import traceback
import types
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

ROOT = Path(os.getcwd())
sys.path.insert(0, str(ROOT))
HERE = Path(__file__).resolve().parent
T0 = time.perf_counter()
DEADLINE_S = 80.0  # steps not started by then are skipped (the caller's timeout is ~150 s)
NEW = HERE / "layernorm_new.py"
_ROOT_FILE = ROOT / "kernels" / "cuda" / "layernorm.py"
_SAME = _ROOT_FILE.exists() and NEW.exists() and _ROOT_FILE.read_bytes() == NEW.read_bytes()
FILES = {"old": HERE / "layernorm_old.py" if _SAME else _ROOT_FILE, "new": NEW}
# Tuner corners of the new file: CONFIG text -> replacement.
CONFIG_LINE = '"WIDE_STAGES": 1, "WIDE_PARAMS": 2'
VARIANTS = {
    "new-s2": '"WIDE_STAGES": 2, "WIDE_PARAMS": 2',  # two rows staged (50257: both params in L2)
    "new-p1": '"WIDE_STAGES": 1, "WIDE_PARAMS": 1',  # the bias from L2 at 32000 too
}
SIZES = [(4096, 50257), (8192, 32000), (16384, 8192), (262144, 128), (4096, 4096)]
H100 = {"sms": 132, "optin": 232448, "regs": 65536}  # 227 KB a block; 64K registers an SM
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


def sha(variant: str) -> str:
    try:
        return hashlib.sha256(source_of(variant).encode()).hexdigest()[:12]
    except Exception as exc:  # a missing file: said, not raised
        return f"unreadable ({type(exc).__name__})"


def load_module(variant: str) -> types.ModuleType:
    """The kernel file as a fresh module (its own name, so old, new and variants coexist)."""
    name = f"ln3_{variant.replace('-', '_')}"
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


def is_new(mod) -> bool:
    return hasattr(mod, "wide_shared")  # the new file: _WIDE is {np: {dtype: kernel}}


def path_of(mod, rows: int, cols: int, size: int, device) -> str:
    plan = mod.launch_plan(rows, cols, size, mod.CONFIG, device)
    if is_new(mod):
        hit = [np for np, ks in mod._WIDE.items() if plan[0] is ks]
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
    """(rows, cols, dtype name, view): odd and tiny widths, both sides of every path's limit
    (narrow / wide with 2, 1, 0 parameters in shared memory / narrow again past the stage),
    rows fewer than the SMs and not a multiple of them, widths whose vector count is a multiple
    of 32 (the halo's last entry), strided, offset, 3-D and ill-conditioned rows. full=False:
    the wide-path cases only."""
    wide = []
    for rows, cols in [(133, 50257), (1, 50257), (300, 32000), (7, 30001), (3, 38000),
                       (5, 40000), (4, 57337), (3, 56936), (3, 56937), (2, 65536), (2, 65537),
                       (265, 24577), (2, 24576), (67, 50264), (17, 51199), (5, 51200),
                       (270, 40001)]:  # fmt: skip
        for dt in ("bfloat16", "float16"):
            wide.append((rows, cols, dt, "plain"))
    for rows, cols in [(9, 20001), (5, 28000), (4, 50257), (131, 12289), (3, 16000),
                       (9, 25599), (3, 28600)]:  # fmt: skip
        wide.append((rows, cols, "float32", "plain"))
    for view in ("strided", "strided16", "offset", "batched3d", "mean10", "big"):
        wide.append((67, 50257, "bfloat16", view))
        wide.append((9, 32001, "float16", view))
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
    """Each case run three times (bitwise equal: deterministic). The new wide path does the old
    one's arithmetic in the old order, so wherever both files take a path of the same kind the
    new output should equal the old bit for bit."""
    import torch

    dev = torch.device("cuda")
    for variant, mod in mods.items():
        if mod is None or variant == "old" or late():
            continue
        bad, cases = 0, correctness_cases(full=variant == "new")
        for rows, cols, dtname, view in cases:
            if late():
                ERRORS.append(f"correctness {variant}: stopped at the deadline")
                break
            label = f"{variant} {rows}x{cols} {dtname} {view}"
            same_old, old_path = None, None
            try:
                args = make_case(rows, cols, dtname, view)
                outs = [mod.kernel_fn(*args) for _ in range(3)]
                torch.cuda.synchronize()
                ok, err, rel = compare(outs[0], args)
                det = all(torch.equal(outs[0], o) for o in outs[1:])
                n, size = args[0].numel() // cols, args[0].element_size()
                path = path_of(mod, n, cols, size, dev)
                if mods.get("old") is not None:
                    same_old = bool(torch.equal(outs[0], mods["old"].kernel_fn(*args)))
                    old_path = path_of(mods["old"], n, cols, size, dev)
            except Exception as exc:
                ok, err, rel, det, path = False, float("nan"), float("nan"), False, f"error {exc}"
            if not (ok and det):
                bad += 1
                log(f"WRONG {label}: ok={ok} err={err:.2e} deterministic={det} {path}")
            results.append({"variant": variant, "case": f"{rows}x{cols}", "dtype": dtname,
                            "view": view, "path": path, "old_path": old_path, "ok": ok,
                            "deterministic": det, "max_abs_err": err, "rel_err": rel,
                            "same_as_old": same_old})  # fmt: skip
        log(f"correctness {variant}: {len(cases)} cases, {bad} wrong or non-deterministic")


def bench_us(fn) -> tuple[float, float, float]:
    """triton.testing.do_bench median (p20, p80) in µs, L2 flushed before every repetition."""
    import triton.testing

    med, p20, p80 = triton.testing.do_bench(fn, warmup=25, rep=100, quantiles=[0.5, 0.2, 0.8])
    return med * 1e3, p20 * 1e3, p80 * 1e3


@step("timing")
def timing(mods, rows_out):
    import torch

    dev = torch.device("cuda")
    for rows, cols in SIZES:
        if late():
            ERRORS.append(f"timing {rows}x{cols}: skipped, past the deadline")
            continue
        args = inputs(rows, cols, torch.bfloat16)
        dst = torch.empty_like(args[0])
        copy_us, _, _ = bench_us(lambda d=dst, s=args[0]: d.copy_(s))
        size = f"{rows}x{cols}"
        rows_out.append({"variant": "copy", "size": size, "us": copy_us, "pct": 100.0,
                         "rel_err": None, "ok": True, "path": "", "spread": None})  # fmt: skip
        for variant, mod in mods.items():
            if mod is None:
                continue
            try:
                out = mod.kernel_fn(*args)
                ok, _, rel = compare(out, args)
                del out
                us, p20, p80 = bench_us(lambda m=mod, a=args: m.kernel_fn(*a))
                path = path_of(mod, rows, cols, 2, dev)
            except Exception as exc:
                log(f"FAILED timing {variant} {size}: {exc}")
                us, p20, p80, ok, rel, path = (float("nan"),) * 3 + (False, float("nan"), "error")
            rows_out.append({"variant": variant, "size": size, "us": us,
                             "pct": 100 * copy_us / us, "rel_err": rel, "ok": ok,
                             "path": path, "spread": p80 - p20})  # fmt: skip
            log(f"{variant:8s} {size:12s} {us:9.2f} us {100 * copy_us / us:6.1f} % of copy "
                f"({copy_us:.2f} us) rel_err={rel:.2e} ok={ok} {path}")  # fmt: skip
        again, _, _ = bench_us(lambda d=dst, s=args[0]: d.copy_(s))  # drift over the size
        rows_out.append({"variant": "copy-after", "size": size, "us": again,
                         "pct": 100 * copy_us / again, "rel_err": None, "ok": True, "path": "",
                         "spread": None})  # fmt: skip
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


def check_plan(mod, rows, cols, size, plan, props) -> str:
    """What the new kernels assume of a plan (layernorm_wide's shared-memory layout: NP params
    of nw vectors, a halo of nw // 32 + 1 for each other one, WIDE_STAGES stages of nw + 1;
    the halo index k >> 5 <= nw >> 5 and stage index k < nvec <= nw + 1 stay inside), and
    that the plan takes the most parameters that fit. Returns the path."""
    cfg, vec = mod.CONFIG, 16 // size
    nvec = -(-cols // vec) + (cols % vec != 0)  # the most vectors a row can span
    nw = -(-cols // vec)
    kernels, grid, block, *extra, shared = plan
    g, stages = cfg["WIDE_THREADS"], cfg["WIDE_STAGES"]
    narrow_fits = nvec <= cfg["MAX_THREADS"] * cfg["ITEMS"]
    if kernels is mod._KERNELS:
        rgrid, rblock, rg, items, rshared = mod.rows_plan(rows, cols, size, cfg)
        assert (grid, block, *extra, shared) == (rgrid, rblock, rg, items, rshared)
        assert shared <= props["optin"] and block <= 1024
        if not narrow_fits and nvec <= g * cfg["WIDE_ITEMS"] and nw >= g:  # wide went narrow
            lo = 1 if stages < 2 else 0
            fits = [
                np
                for np in range(lo, min(cfg["WIDE_PARAMS"], 2) + 1)
                if mod.wide_shared(cols, size, np, stages) + 1024 <= props["optin"]
            ]
            assert not fits, f"a wide plan fit {rows}x{cols} {size}: {fits}"
        return "narrow"
    (np,) = [n for n, ks in mod._WIDE.items() if ks is kernels]
    assert not narrow_fits, "narrow rows stay on the narrow path"
    assert nvec <= g * cfg["WIDE_ITEMS"], "the row fits the slots"
    # lanes past the row read weight / bias vector k - 1 < nvec + g - 1 <= nw + g from shared
    # memory: inside the layout when g <= nw (the next region is at least nw + 1 long)
    assert nw >= g, "a vector a thread at least"
    assert block == g and grid == min(rows, props["sms"]) and extra == []
    assert np <= cfg["WIDE_PARAMS"] and (np >= 1 or stages >= 2), "NP 0 is built with 2 stages"
    layout = (np * nw + (2 - np) * (nw // 32 + 1) + stages * (nw + 1)) * 16
    assert shared == layout == mod.wide_shared(cols, size, np, stages)
    assert shared + 2 * 32 * 4 <= props["optin"], "dynamic + red[2][32] in the opt-in"
    if np < min(cfg["WIDE_PARAMS"], 2):
        assert mod.wide_shared(cols, size, np + 1, stages) + 1024 > props["optin"], "more fit"
    assert g * 64 <= props["regs"], "64 registers a thread (launch bounds) x the block"
    return f"wide{np}"


def bytes_note(mod, rows, cols, size, path) -> str:
    """HBM bytes (x read, y written) and L2-only bytes (parameters read again each row)."""
    nw = -(-cols // (16 // size))
    hbm = 2 * rows * cols * size
    l2 = {"wide0": 2, "wide1": 1}.get(path, 0) * rows * nw * 16
    if path == "narrow" and -(-cols // (16 // size)) > 32 * mod.CONFIG["ITEMS"]:
        l2 = 2 * 2 * rows * nw * 16  # the narrow path: lo and hi of both, from L2
    return f"HBM {hbm / 1e6:.0f} MB, L2 param reads {l2 / 1e6:.0f} MB"


def ptxas_report(variants) -> dict:
    """Registers and spills of every entry point, sm_90a, at each variant's CONFIG."""
    from autokernel import cuda_build
    from autokernel.harness.guards import literal_assignment

    nvcc = cuda_build.find_nvcc()

    def one(variant):
        text = source_of(variant)
        src, cfg = literal_assignment(text, "CUDA_SOURCE"), literal_assignment(text, "CONFIG")
        flags = [*cuda_build.BASE_FLAGS, "-arch=sm_90a", *cuda_build.define_flags(cfg),
                 "-Xptxas", "-v"]  # fmt: skip
        with tempfile.TemporaryDirectory() as d:
            (Path(d) / "k.cu").write_text(src)
            r = subprocess.run([nvcc, *flags, "k.cu", "-o", "k.cubin"], cwd=d, text=True,
                               capture_output=True, timeout=600)  # fmt: skip
        out, fn, info = r.stdout + r.stderr, None, {}
        for line in out.splitlines():
            m = re.search(r"Compiling entry function '(\w+)'", line)
            fn = m.group(1) if m else fn
            m = re.search(r"(\d+) bytes spill stores, (\d+) bytes spill loads", line)
            if m and fn:
                info.setdefault(fn, {})["spill"] = (int(m.group(1)), int(m.group(2)))
            m = re.search(r"Used (\d+) registers", line)
            if m and fn:
                info.setdefault(fn, {})["regs"] = int(m.group(1))
        return variant, r.returncode, info, out[-2000:]

    report = {}
    with ThreadPoolExecutor(len(variants)) as pool:
        for variant, rc, info, tail in pool.map(one, variants):
            report[variant] = {"rc": rc, "kernels": info}
            assert rc == 0, f"{variant}: nvcc failed\n{tail}"
    return report


def dry(out: Path, ptxas: bool, variants: list[str]) -> int:
    """No GPU: the files, the plans old, new and the variants choose on an H100, ptxas."""
    import torch

    from autokernel import cuda_build
    from autokernel.harness.cuda_check import tokenize
    from autokernel.harness.cuda_source import entry_points
    from autokernel.harness.guards import literal_assignment

    for variant, path in FILES.items():
        print(f"{variant}: {path} exists={path.exists()} sha={sha(variant)}")
        assert path.exists(), path
    committed = ROOT / "kernels" / "cuda" / "layernorm.py"
    print(f"new identical to {committed}: {_SAME}")
    assert FILES["old"].read_bytes() != FILES["new"].read_bytes(), "old and new are one file"
    real_load, real_props = cuda_build.load, torch.cuda.get_device_properties

    def fake_load(src, cfg=None):
        names = [e.name for e in entry_points(tokenize(src))]
        return types.SimpleNamespace(**{n: types.SimpleNamespace(name=n) for n in names})

    cuda_build.load = fake_load
    props = types.SimpleNamespace(multi_processor_count=H100["sms"],
                                  shared_memory_per_block_optin=H100["optin"])  # fmt: skip
    torch.cuda.get_device_properties = lambda d=None: props
    lines, n, paths = [], 0, {}
    try:
        for variant in ("old", "new", *variants):
            mod = load_module(variant)
            assert literal_assignment(source_of(variant), "CONFIG") == mod.CONFIG
            space = literal_assignment(source_of(variant), "SEARCH_SPACE")
            assert all(mod.CONFIG[k] in space[k] for k in space), f"{variant}: CONFIG in space"
            for rows, cols in [*SIZES, (1, 1), (4095, 4097), (3, 38000), (5, 40000),
                               (3, 56936), (3, 56937), (2, 65537), (9, 20001), (1, 50257),
                               (9, 25599), (3, 28600), (17, 51199)]:  # fmt: skip
                for dt in (torch.bfloat16, torch.float16, torch.float32):
                    plan = mod.launch_plan(rows, cols, dt.itemsize, mod.CONFIG, "cuda")
                    path = path_of(mod, rows, cols, dt.itemsize, "cuda")
                    if is_new(mod):
                        assert check_plan(mod, rows, cols, dt.itemsize, plan, H100) == path
                        n += 1
                    paths[(variant, rows, cols, str(dt))] = path
                    note = bytes_note(mod, rows, cols, dt.itemsize, path)
                    lines.append(f"{variant} {rows}x{cols} {dt}: {path} {plan[1:]} {note}")
        # the tuner's corners (smallest and largest of every key) plan within the layout too
        mod = load_module("new")
        space = literal_assignment(source_of("new"), "SEARCH_SPACE")
        for pick in (min, max):
            cfg = {k: pick(v) for k, v in space.items()}
            for cols in (300, 2049, 4097, 8200, 16385, 32000, 50257, 57337, 65537, 120000):
                for size in (2, 4):
                    plan = mod.launch_plan(64, cols, size, cfg, "cuda")
                    real = mod.CONFIG
                    mod.CONFIG = cfg  # check_plan reads the module's CONFIG
                    try:
                        check_plan(mod, 64, cols, size, plan, H100)
                    finally:
                        mod.CONFIG = real
                    n += 1
        # the sizes of issue 17 in bf16: which path each file takes
        want = {"old": ["wide", "wide", "narrow", "narrow", "narrow"],
                "new": ["wide1", "wide2", "narrow", "narrow", "narrow"],
                "new-s2": ["wide0", "wide1", "narrow", "narrow", "narrow"],
                "new-p1": ["wide1", "wide1", "narrow", "narrow", "narrow"]}  # fmt: skip
        for variant in ("old", "new", *variants):
            got = [paths[(variant, r, c, "torch.bfloat16")] for r, c in SIZES]
            assert got == want[variant], f"{variant}: paths {got}, expected {want[variant]}"
        print("\n".join(lines))
        n_new, n_var = len(correctness_cases()), len(correctness_cases(False))
        print(f"{n} plans checked; {n_new} correctness cases for new, {n_var} a variant")
    finally:
        cuda_build.load, torch.cuda.get_device_properties = real_load, real_props
    report = {}
    if ptxas:
        t = time.perf_counter()
        report = ptxas_report(["new", *variants])
        for variant, r in report.items():
            threads = literal_assignment(source_of(variant), "CONFIG")["WIDE_THREADS"]
            for fn, info in sorted(r["kernels"].items()):
                lines.append(f"ptxas {variant} {fn}: {info}")
                assert info["regs"] <= 64 and info["regs"] * threads <= H100["regs"], (variant, fn)
                if variant == "new":  # the committed CONFIG: no spills anywhere
                    assert info["spill"] == (0, 0), f"{variant} {fn} spills {info}"
        print("\n".join(x for x in lines if x.startswith("ptxas")))
        print(f"ptxas: {time.perf_counter() - t:.0f} s")
    out.mkdir(parents=True, exist_ok=True)
    (out / "ln3.md").write_text("dry run: no GPU\n\n" + "\n".join(lines) + "\n")
    (out / "ln3.json").write_text(json.dumps({"dry": True, "ptxas": report}, indent=1))
    print("dry run done")
    return 0


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("outdir", type=Path)
    ap.add_argument("--dry", action="store_true", help="no GPU: check files and plans only")
    ap.add_argument("--no-ptxas", action="store_true", help="--dry without the sm_90a builds")
    ap.add_argument("--full-harness", action="store_true", help="harness without --quick")
    ap.add_argument("--no-harness", action="store_true")
    ap.add_argument("--no-variants", action="store_true")
    args = ap.parse_args()
    variants = [] if args.no_variants else list(VARIANTS)
    if args.dry:
        return dry(args.outdir, not args.no_ptxas, variants)
    args.outdir.mkdir(parents=True, exist_ok=True)
    gpu, rows, results, verdicts = "?", [], [], []
    try:
        import torch

        if not torch.cuda.is_available():
            print("no GPU here: use --dry", file=sys.stderr)
            ERRORS.append("no GPU")
            return 2
        gpu = torch.cuda.get_device_name()
        log(f"{gpu}, torch {torch.__version__}, cwd {ROOT}, old {FILES['old']} ({sha('old')}), "
            f"new {FILES['new']} ({sha('new')})")  # fmt: skip
        names = ["old", "new", *variants]
        prewarm(names)
        mods = {v: step(f"load {v}")(load_module)(v) for v in names}
        # The harness (a cold build in its sandbox, then its stages) runs beside the correctness
        # cases, and is waited for before the timing, which has the GPU to itself.
        pool = ThreadPoolExecutor(1)
        pending = None if args.no_harness else pool.submit(harness, not args.full_harness,
                                                           verdicts)  # fmt: skip
        correctness(mods, results)
        if pending is not None:
            pending.result()
        pool.shutdown()
        timing(mods, rows)
    except Exception as exc:
        ERRORS.append(f"main: {type(exc).__name__}: {exc}")
        traceback.print_exc(limit=5)
    finally:
        write(args.outdir, gpu, rows, results, verdicts)
        log("done")
    return 0


def write(outdir: Path, gpu: str, rows, results, verdicts) -> None:
    try:
        import torch

        version = torch.__version__
    except Exception:
        version = "?"
    wrong = [r for r in results if not (r["ok"] and r["deterministic"])]
    new = [r for r in results if r["variant"] == "new"]
    same_kind = [r for r in new if r["path"].rstrip("012") == (r["old_path"] or "-").rstrip("012")]
    differ = [r for r in same_kind if r["same_as_old"] is False]
    paths: dict[str, int] = {}
    for r in results:
        paths[f"{r['variant']} {r['path']}"] = paths.get(f"{r['variant']} {r['path']}", 0) + 1
    md = [f"# CUDA layernorm, old vs new ({gpu})", "",
          f"torch {version}; triton.testing.do_bench median (L2 flushed), bf16; copy: a device "
          f"copy of the same bytes (copy-after: the same copy after the size's kernels); timed "
          f"with the GPU to itself (the harness ran beside the correctness cases, before). old: "
          f"{FILES['old']} ({sha('old')}); new: {FILES['new']} ({sha('new')}).", "",
          table(rows), "",
          f"Correctness: {len(results)} cases (new: fp16/bf16/fp32, N=1, odd widths, every "
          f"path's limits, strided, offset, 3-D, mean 10 std 0.1, large values; variants: the "
          f"wide-path cases; each run three times): {len(wrong)} wrong or non-deterministic. "
          f"Paths: {paths}. New cases on a path of the kind the old file took, bitwise equal to "
          f"the old output: {len(same_kind) - len(differ)} of {len(same_kind)}.", ""]  # fmt: skip
    md += [f"- WRONG {r}" for r in wrong[:40]]
    md += [f"- differs from old: {r}" for r in differ[:10]]
    md += ["", "Five stages of the new file:"]
    md += [f"- {v['status']} {v['message']} (quick={v['quick']}, {v['seconds']} s)"
           for v in verdicts]  # fmt: skip
    md += (["", "Errors:"] + [f"- {e}" for e in ERRORS]) if ERRORS else []
    text = "\n".join(md) + "\n"
    (outdir / "ln3.md").write_text(text)
    (outdir / "ln3.json").write_text(json.dumps(
        {"gpu": gpu, "torch": version, "timing": rows, "correctness": results,
         "verdicts": verdicts, "errors": ERRORS, "seconds": time.perf_counter() - T0,
         "old": str(FILES["old"]), "new": str(FILES["new"]), "sha_old": sha("old"),
         "sha_new": sha("new")}, indent=1, default=str))  # fmt: skip
    print(text)


if __name__ == "__main__":
    sys.exit(main())
