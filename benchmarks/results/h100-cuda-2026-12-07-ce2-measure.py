"""Old vs new CUDA cross_entropy starter: correctness against reference.py (float64), bitwise
determinism, device time against the copy ceiling cuda_backend.py uses, host time per call, and
the five-stage harness on the new file.

Run from the repository root (old starter in kernels/cuda/, new one beside this file):
    python3 .devrun/ce2/measure.py OUTDIR [--quick-harness] [--no-harness] [--no-variants] [--dry]
Writes OUTDIR/ce2.md and OUTDIR/ce2.json (rewritten after every step, so a run cut short keeps
what it measured). Every step is in try/except: one failure is recorded and the rest still run.
Budget: about 120 s; a step that would not fit is skipped and noted.

Ceiling, as benchmarks/cuda_backend.py defines it: a bf16 device copy of n elements with
n = spec.bytes_moved(size) // 2 // 2, i.e. read + write of the spec's bytes (logits + targets),
while cross-entropy only reads them. Timings: autokernel.timing.measure (do_bench median, L2
flushed), bf16 logits and targets from the spec's own generator (5 % ignored rows).

--dry (no GPU): the files, the guard, an nvcc build of the new source for sm_90a, and the whole
correctness loop on the CPU with the kernels replaced by torch stand-ins, so the host code of
both files (plans, workspace, argument order) and this script's cases are exercised.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import threading
import time
import traceback
import types
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

ROOT = Path(os.getcwd())
sys.path.insert(0, str(ROOT))
HERE = Path(__file__).resolve().parent
T0 = time.perf_counter()
BUDGET_S = 115.0
FILES = {
    "old": ROOT / "kernels" / "cuda" / "cross_entropy.py",
    "new": HERE / "cross_entropy_new.py",
}
# name -> (file, CONFIG overrides): block sizes and loads in flight around the new default, the
# old file with the new default's 128-thread rows (block size alone, without the other changes),
# and the corners of the new SEARCH_SPACE (checked for correctness, not timed).
VARIANTS = {
    "new-64": ("new", {"MAX_THREADS": 64}),
    "new-256": ("new", {"MAX_THREADS": 256}),
    "new-512": ("new", {"MAX_THREADS": 512}),
    "new-items4": ("new", {"ITEMS": 4}),
    "old-128": ("old", {"MAX_THREADS": 128}),
}
CORNERS = {
    "new-min": ("new", {"ITEMS": 2, "MAX_THREADS": 64, "NARROW_BLOCK": 64}),
    "new-max": ("new", {"ITEMS": 6, "MAX_THREADS": 1024, "NARROW_BLOCK": 512}),
}
TIMED = [(8192, 50257), (16384, 32000), (8192, 128256), (4096, 4096), (16, 4096)]
HOST_SIZES = [(16, 4096), (8192, 50257)]
# fp32 arithmetic on exact inputs: far inside the spec's bf16 tolerance; a case past this is
# listed (not failed), since an fp32 accumulation slip hides inside 2e-2.
TIGHT_REL = 1e-4
HOST_CALLS, HOST_ROUNDS = 100, 20  # as benchmarks/host_overhead.py: no call waits for the GPU
DATA: dict = {"timing": [], "correctness": [], "host": [], "verdicts": [], "errors": [],
              "notes": [], "builds": {}}  # fmt: skip
OUT: Path | None = None


def log(msg: str) -> None:
    print(f"[{time.perf_counter() - T0:6.1f}s] {msg}", flush=True)


def left() -> float:
    return BUDGET_S - (time.perf_counter() - T0)


def step(name):
    """Run fn, record a failure instead of raising, rewrite the report after it."""

    def wrap(fn):
        def run(*a, **k):
            try:
                return fn(*a, **k)
            except Exception as exc:
                DATA["errors"].append(f"{name}: {type(exc).__name__}: {exc}")
                log(f"FAILED {name}: {type(exc).__name__}: {exc}")
                traceback.print_exc(limit=4)
                return None
            finally:
                flush()

        return run

    return wrap


def source_of(variant: str) -> str:
    """The file's text, with its one-line CONFIG literal rewritten for a variant."""
    from autokernel.harness.guards import literal_assignment

    base, over = ({**VARIANTS, **CORNERS}).get(variant, (variant, {}))
    text = FILES[base].read_text()
    if not over:
        return text
    config = {**literal_assignment(text, "CONFIG"), **over}
    lines = [i for i, line in enumerate(text.splitlines()) if line.startswith("CONFIG = {")]
    assert len(lines) == 1 and text.splitlines()[lines[0]].endswith("}"), "one-line CONFIG"
    out = text.splitlines(keepends=True)
    out[lines[0]] = f"CONFIG = {config!r}\n"
    return "".join(out)


def load_module(variant: str) -> types.ModuleType:
    """The kernel file as a fresh module of its own name, so every variant coexists."""
    import importlib.util

    name = f"ce2_{variant.replace('-', '_')}"
    path = FILES[({**VARIANTS, **CORNERS}).get(variant, (variant,))[0]]
    spec = importlib.util.spec_from_loader(name, loader=None, origin=str(path))
    mod = importlib.util.module_from_spec(spec)
    mod.__file__ = str(path)
    sys.modules[name] = mod
    exec(compile(source_of(variant), str(path), "exec"), mod.__dict__)
    return mod


@step("prewarm")
def prewarm(variants) -> None:
    """Every source compiled at once (one nvcc each), so the imports hit the cache."""
    import torch

    from autokernel import cuda_build
    from autokernel.harness.guards import literal_assignment

    nvcc = cuda_build.find_nvcc()
    dev = torch.cuda.current_device()

    def one(v):
        text = source_of(v)
        src, cfg = literal_assignment(text, "CUDA_SOURCE"), literal_assignment(text, "CONFIG")
        flags = cuda_build.build_flags(cfg, dev)
        ck = cuda_build.cache_key(src, flags, cuda_build.nvcc_version(nvcc))
        t = time.perf_counter()
        _, s = cuda_build._cached_or_built(ck, src, nvcc, flags)
        return v, s, time.perf_counter() - t

    with ThreadPoolExecutor(len(variants)) as pool:
        for v, s, wall in pool.map(one, variants):
            DATA["builds"][v] = {"compile_s": s, "wall_s": round(wall, 2)}
            log(f"built {v}: compile_s={s} wall={wall:.1f}s")


def correctness_cases(dry: bool) -> list[tuple]:
    """(rows, cols, dtype, logits mode, targets mode, view)."""
    cases = []
    shapes = [(1, 1), (1, 2), (3, 7), (5, 1023), (33, 4096), (64, 1000), (1023, 1537),
              (4097, 1023), (3, 50257), (133, 50257), (300, 32000), (17, 128256), (2, 151936),
              (1, 32000), (4096, 33), (1000, 8), (70001, 16), (20000, 4096), (1000, 50257)]  # fmt: skip
    for dt in ("bfloat16", "float16", "float32"):
        for rows, cols in shapes:
            cases.append((rows, cols, dt, "randn", "spec", "plain"))
    for rows, cols in [(300, 32000), (257, 50257), (64, 1000), (9, 513)]:
        for lm, tm in [("large", "spec"), ("randn", "extreme"), ("confident", "spec"),
                       ("neginf", "spec"), ("randn", "all_ignored"), ("randn", "none_ignored"),
                       ("randn", "out_of_range")]:  # fmt: skip
            cases.append((rows, cols, "bfloat16", lm, tm, "plain"))
        cases.append((rows, cols, "float32", "large", "spec", "plain"))
    for view in ("strided", "strided16", "offset", "colmajor", "targets_strided"):
        for rows, cols, dt in [(67, 50257, "bfloat16"), (20, 8192, "float16"), (9, 20001, "float32"),
                               (500, 100, "bfloat16")]:  # fmt: skip
            cases.append((rows, cols, dt, "randn", "spec", view))
    cases.append((0, 32000, "bfloat16", "randn", "spec", "plain"))
    if dry:  # float64 references of the largest cases take too long on a small CPU
        cases = [c for c in cases if c[0] * c[1] <= 4_000_000]
    return cases


def make_case(rows, cols, dtname, lmode, tmode, view, device):
    import torch

    from autokernel import reference

    dtype = getattr(torch, dtname)
    # drawn where the kernel runs: 20000x4096 on a CPU took a second a case
    g = torch.Generator(device=device).manual_seed(rows * 7 + cols * 3 + len(lmode + tmode + view))
    kw = {"generator": g, "device": device}
    x = torch.randn(rows, cols, **kw) * 2.0
    t = torch.randint(0, max(cols, 1), (rows,), **kw)
    every = torch.arange(rows, device=device)
    if tmode == "spec":
        ignore = torch.rand(rows, **kw) < 0.05
        ignore[:1] = False
        t = t.masked_fill(ignore, reference.IGNORE_INDEX)
    elif tmode == "extreme":
        t[0::3], t[1::3], t[2::3] = 0, cols - 1, reference.IGNORE_INDEX
    elif tmode == "all_ignored":
        t[:] = reference.IGNORE_INDEX
    elif tmode == "out_of_range":
        t[rows // 2] = cols  # the kernel's contract: NaN, never a wrong loss
    if lmode == "large":
        scale = 3.0e3 if dtname != "float32" else 3.0e4
        x = (x / 2 * scale).clamp(-6.0e4, 6.0e4)
    elif lmode == "confident":
        x = x / 2
        x[every, t.clamp(0, cols - 1)] = 30.0
    elif lmode == "neginf":  # masked vocabulary entries, the target's kept finite
        x[torch.rand(rows, cols, **kw) < 0.1] = float("-inf")
        x[every, t.clamp(0, cols - 1)] = 1.0
    x = x.to(dtype)
    if view in ("strided", "strided16"):  # rows off 16-byte alignment (+13) or on it (+16 B)
        pad = 13 if view == "strided" else 16 // x.element_size()
        buf = torch.zeros(rows, cols + pad, dtype=dtype, device=device)
        buf[:, :cols] = x
        x = buf[:, :cols]
    elif view == "offset":  # one element into its storage
        buf = torch.zeros(rows * cols + 1, dtype=dtype, device=device)
        buf[1:] = x.reshape(-1)
        x = buf[1:].view(rows, cols)
    elif view == "colmajor":  # stride(-1) != 1: kernel_fn copies
        x = x.t().contiguous().t()
    elif view == "targets_strided":
        t = torch.stack([t, t]).t().reshape(-1)[::2]
    return x, t


def expected(x, t, tmode):
    """The float64 reference; NaN where the kernel's contract says so (torch would raise or
    assert on the device for an out-of-range target, so that case never reaches it)."""
    import torch

    from autokernel import reference

    if tmode == "out_of_range":
        return torch.tensor(float("nan"), dtype=torch.float64)
    return reference.cross_entropy(x.double(), t).cpu()


def judge(out, ref, dtype) -> tuple[bool, float]:
    """(within the spec's tolerance, relative error)."""
    import torch

    from autokernel.specs import get_spec

    atol, rtol = get_spec("cross_entropy").tolerance(dtype)
    o = out.detach().double().cpu()
    if torch.isnan(ref):
        return bool(torch.isnan(o)), 0.0 if torch.isnan(o) else float("inf")
    err = float((o - ref).abs())
    ok = out.dtype == torch.float32 and out.shape == () and err <= atol + rtol * abs(float(ref))
    return bool(ok), err / max(abs(float(ref)), 1e-30)


def bits(t):
    import torch

    return t.detach().reshape(1).view(torch.int32).cpu()


@step("correctness")
def correctness(mods: dict, device: str, dry: bool) -> None:
    import torch

    for variant, mod in mods.items():
        if mod is None:
            continue
        cases = correctness_cases(dry)
        if variant != "new":  # variants and corners: the shapes that exercise plans and tickets
            cases = [c for c in cases if c[3:] == ("randn", "spec", "plain")]
        bad = 0
        for rows, cols, dtname, lm, tm, view in cases:
            label = f"{variant} {rows}x{cols} {dtname} {lm} {tm} {view}"
            try:
                x, t = make_case(rows, cols, dtname, lm, tm, view, device)
                other = make_case(rows, cols, dtname, "randn", "none_ignored", "plain", device)
                outs = []
                for args in (x, t), (x, t), other, (x, t):  # the harness's a, a, b, a
                    outs.append(mod.kernel_fn(*args))
                if device == "cuda":
                    torch.cuda.synchronize()
                ok, rel = judge(outs[0], expected(x, t, tm), x.dtype)
                det = all(torch.equal(bits(outs[0]), bits(o)) for o in (outs[1], outs[3]))
                got = float(outs[0])
            except Exception as exc:
                ok, rel, det, got = False, float("nan"), False, f"error {exc}"
            tight = ok and rel <= TIGHT_REL
            if not (ok and det):
                bad += 1
                log(f"WRONG {label}: ok={ok} rel_err={rel:.2e} deterministic={det} got={got}")
            DATA["correctness"].append({"variant": variant, "case": f"{rows}x{cols}",
                                        "dtype": dtname, "logits": lm, "targets": tm,
                                        "view": view, "ok": ok, "deterministic": det,
                                        "rel_err": rel, "tight": tight, "got": got})  # fmt: skip
        log(f"correctness {variant}: {len(cases)} cases, {bad} wrong or non-deterministic")


@step("timing")
def timing(mods: dict) -> None:
    import torch

    from autokernel.specs import get_spec
    from autokernel.timing import measure

    spec = get_spec("cross_entropy")
    for rows, cols in TIMED:
        if left() < 25:
            DATA["notes"].append(f"timing {rows}x{cols} and later: skipped, out of budget")
            break
        size = {"rows": rows, "vocab": cols}
        label = f"{rows}x{cols}"
        gen = torch.Generator(device="cuda").manual_seed(0)
        x, t = spec.make_inputs(size, torch.bfloat16, gen, torch.device("cuda"))
        ref = expected(x, t, "spec")
        n = int(spec.bytes_moved(size, torch.bfloat16) // 2 // 2)
        src = torch.empty(n, dtype=torch.bfloat16, device="cuda")
        dst = torch.empty_like(src)
        copy_us = measure(lambda d=dst, s=src: d.copy_(s), True).median_us
        del src, dst
        DATA["timing"].append({"variant": "copy", "size": label, "us": copy_us, "pct": 100.0,
                               "rel_err": None, "ok": True})  # fmt: skip
        t_all = t.clamp_min(0)  # every row counted: the ignored-row skip's share
        for variant, mod in [*list(mods.items()), ("new, no ignored rows", mods.get("new"))]:
            if mod is None or variant in CORNERS:
                continue
            tt = t_all if variant.endswith("no ignored rows") else t
            try:
                out = mod.kernel_fn(x, tt)
                r = ref if tt is t else expected(x, tt, "none_ignored")
                ok, rel = judge(out, r, x.dtype)
                us = measure(lambda m=mod, x=x, tt=tt: m.kernel_fn(x, tt), True).median_us
            except Exception as exc:
                log(f"FAILED timing {variant} {label}: {exc}")
                us, ok, rel = float("nan"), False, float("nan")
            DATA["timing"].append({"variant": variant, "size": label, "us": us,
                                   "pct": 100 * copy_us / us, "rel_err": rel, "ok": ok})  # fmt: skip
            log(f"{variant:22s} {label:12s} {us:9.2f} us {100 * copy_us / us:6.1f} % of copy "
                f"({copy_us:.2f} us) rel_err={rel:.2e} ok={ok}")  # fmt: skip
        del x, t, t_all
        torch.cuda.empty_cache()
        flush()


def host_us(fn) -> float:
    import torch

    times = []
    for _ in range(HOST_ROUNDS):
        torch.cuda.synchronize()
        for _ in range(HOST_CALLS):
            start = time.perf_counter()
            fn()
            times.append(time.perf_counter() - start)
    torch.cuda.synchronize()
    return statistics.median(times) * 1e6


@step("host")
def host(mods: dict) -> None:
    import torch
    import torch.nn.functional as F

    from autokernel.specs import get_spec

    spec = get_spec("cross_entropy")
    for rows, cols in HOST_SIZES:
        gen = torch.Generator(device="cuda").manual_seed(0)
        x, t = spec.make_inputs({"rows": rows, "vocab": cols}, torch.bfloat16, gen,
                                torch.device("cuda"))  # fmt: skip
        fns = {"old": mods.get("old"), "new": mods.get("new")}
        for name, fn in [*((k, m and m.kernel_fn) for k, m in fns.items()),
                         ("torch F.cross_entropy", lambda a, b: F.cross_entropy(a, b))]:  # fmt: skip
            if fn is None:
                continue
            with torch.no_grad():
                for _ in range(3):
                    fn(x, t)
                us = host_us(lambda fn=fn, x=x, t=t: fn(x, t))
            DATA["host"].append({"variant": name, "size": f"{rows}x{cols}", "host_us": us})
            log(f"host {name:22s} {rows}x{cols}: {us:.2f} us a call")


def harness(quick: bool) -> None:
    """The five stages on the new file, without the harness's own timings (they would run
    beside this script's correctness step; the timing step measures the file alone)."""
    try:
        from autokernel.harness.sandbox import Options, evaluate

        t = time.perf_counter()
        v = evaluate(FILES["new"], Options(timeout_s=100, quick=quick, compile_baseline=False,
                                           timing=False, prestart=False))  # fmt: skip
        DATA["verdicts"].append({"status": v.status.name, "message": v.message, "quick": quick,
                                 "seconds": round(time.perf_counter() - t, 1),
                                 "stages": [f"{s.name}:{s.status}" for s in v.stages]})  # fmt: skip
        log(f"VERDICT cross_entropy_new: {v.status.name} {v.message}")
    except Exception as exc:
        DATA["errors"].append(f"harness: {type(exc).__name__}: {exc}")
        log(f"FAILED harness: {exc}")


def markdown() -> str:
    d = DATA
    md = [f"# CUDA cross_entropy, old vs new ({d.get('gpu', '?')})", "",
          f"torch {d.get('torch', '?')}; do_bench median (L2 flushed), bf16 logits, spec targets "
          "(5 % ignored); copy: bf16 device copy of the spec's bytes_moved (read + write), as "
          "benchmarks/cuda_backend.py.", "",
          "| variant | size | µs | % of copy | rel_err | ok |", "|---|---|---|---|---|---|"]  # fmt: skip
    for r in d["timing"]:
        rel = "" if r["rel_err"] is None else f"{r['rel_err']:.2e}"
        md.append(f"| {r['variant']} | {r['size']} | {r['us']:.2f} | {r['pct']:.1f} | {rel} | "
                  f"{'yes' if r['ok'] else 'NO'} |")  # fmt: skip
    wrong = [r for r in d["correctness"] if not (r["ok"] and r["deterministic"])]
    by = {}
    for r in d["correctness"]:
        by[r["variant"]] = by.get(r["variant"], 0) + 1
    md += ["", f"Correctness (float64 reference, spec tolerance; each case called a, a, b, a and "
           f"compared bitwise): {by} cases, {len(wrong)} wrong or non-deterministic.", ""]  # fmt: skip
    md += [f"- WRONG {r}" for r in wrong[:40]]
    loose = [r for r in d["correctness"] if r["ok"] and not r.get("tight", True)]
    md += ["", f"Within tolerance but relative error > {TIGHT_REL:g}: {len(loose)}"]
    md += [f"- LOOSE {r}" for r in loose[:20]]
    md += ["", "Host time per call (median of unsynchronised calls):", ""]
    md += [f"- {r['variant']} {r['size']}: {r['host_us']:.2f} us" for r in d["host"]]
    md += ["", "Five stages on the new file:"]
    md += [f"- {v['status']} {v['message']} (quick={v['quick']}, {v['seconds']} s; "
           f"{' '.join(v['stages'])})" for v in d["verdicts"]]  # fmt: skip
    md += ["", f"Builds: {d['builds']}"]
    md += (["", "Notes:"] + [f"- {n}" for n in d["notes"]]) if d["notes"] else []
    md += (["", "Errors:"] + [f"- {e}" for e in d["errors"]]) if d["errors"] else []
    return "\n".join(md) + "\n"


def flush() -> None:
    if OUT is None:
        return
    DATA["seconds"] = round(time.perf_counter() - T0, 1)
    OUT.mkdir(parents=True, exist_ok=True)
    (OUT / "ce2.md").write_text(markdown())
    (OUT / "ce2.json").write_text(json.dumps(DATA, indent=1, default=str))


class FakeKernel:
    """A torch stand-in for one entry point (--dry): checks the launch against the kernel's
    assumptions, then writes what the kernel would."""

    def __init__(self, name: str) -> None:
        self.name = name

    def __call__(self, grid, block, *args, shared: int = 0) -> None:
        import torch

        if self.name == "ce_mean":  # old: the mean of the row losses
            loss, t, out, rows = args
            keep = t[:rows] != -100
            out.fill_(float(loss[:rows][keep].double().sum() / keep.sum()))
            return
        x, t, rest = args[0], args[1], args[2:]
        if self.name.startswith("ce_rows_"):  # old: a loss a row
            loss, rows, cols, xs, g = rest
        else:  # new: the mean in one launch, through the workspace
            ws, out, rows, cols, xs, g, cap = rest
            capg = -(-cap // 32)
            assert grid <= cap and ws.numel() == 1 + 3 * capg + 2 * cap, (grid, cap, ws.numel())
            assert not ws[: 1 + capg].any(), "tickets left non-zero"
            assert ws.dtype == torch.int32 and out.shape == () and out.dtype == torch.float32
        assert block % 32 == 0 and block % g == 0 and (g == block or g <= 32), (block, g)
        assert grid * (block // g) >= rows and grid >= 1, (grid, block, g, rows)
        assert x.shape == (rows, cols) and x.stride(-1) == 1 and x.stride(0) == xs
        assert t.is_contiguous() and t.dtype == torch.int64
        losses = row_losses(x, t)
        if self.name.startswith("ce_rows_"):
            loss[:rows] = losses.float()
        else:
            keep = t != -100
            out.fill_(float(losses[keep].sum() / keep.sum()))


def row_losses(x, t):
    """Float64 row losses: 0 for ignored rows, NaN for an out-of-range target."""
    import torch

    xd = x.double()
    lse = torch.logsumexp(xd, dim=1) if x.shape[1] else xd.new_zeros(x.shape[0])
    idx = t.clamp(0, max(x.shape[1] - 1, 0))
    tl = xd.gather(1, idx[:, None])[:, 0] if x.shape[0] else xd.new_zeros(0)
    loss = torch.where(t == -100, 0.0, lse - tl)
    bad = (t != -100) & ((t < 0) | (t >= x.shape[1]))
    return torch.where(bad, float("nan"), loss)


def dry_run() -> int:
    """No GPU: the files, the guard, an nvcc build, and the correctness loop on stand-ins."""
    import torch

    from autokernel import cuda_build
    from autokernel.harness.guards import check_source, literal_assignment

    DATA.update(gpu="none (--dry: torch stand-ins for the kernels)", torch=torch.__version__)
    for name, path in FILES.items():
        log(f"{name}: {path} exists={path.exists()}")
    findings = check_source(FILES["new"].read_text())
    DATA["notes"].append(f"guard on the new file: {findings or 'clean'}")
    log(f"guard: {findings or 'clean'}")
    try:
        text = FILES["new"].read_text()
        src, cfg = literal_assignment(text, "CUDA_SOURCE"), literal_assignment(text, "CONFIG")
        nvcc = cuda_build.wheel_nvcc() or cuda_build.find_nvcc()
        flags = [*cuda_build.BASE_FLAGS, "-arch=sm_90a", *cuda_build.define_flags(cfg)]
        t = time.perf_counter()
        cubin = cuda_build.compile_cubin(src, nvcc, flags)
        DATA["builds"]["new"] = {"cubin_bytes": len(cubin), "wall_s": time.perf_counter() - t}
        log(f"nvcc sm_90a: {len(cubin)} bytes")
    except Exception as exc:
        DATA["errors"].append(f"nvcc: {type(exc).__name__}: {exc}")
        log(f"FAILED nvcc: {exc}")
    names = ("ce_f16", "ce_bf16", "ce_f32", "ce_rows_f16", "ce_rows_bf16", "ce_rows_f32",
             "ce_mean")  # fmt: skip
    real_load = cuda_build.load
    cuda_build.load = lambda src, cfg=None: types.SimpleNamespace(
        **{n: FakeKernel(n) for n in names}
    )
    try:
        variants = ["old", "new", *VARIANTS, *CORNERS]
        mods = {v: step(f"load {v}")(load_module)(v) for v in variants}
        for v, mod in mods.items():
            if mod is not None:
                plans = {f"{r}x{c}": mod.rows_plan(r, c, 2, mod.CONFIG) for r, c in TIMED}
                log(f"plans {v} {mod.CONFIG}: {plans}")
        correctness({k: m for k, m in mods.items() if not k.startswith("old-")}, "cpu", True)
    finally:
        cuda_build.load = real_load
    harness(quick=True)  # on a CPU: the one-line FAIL a CUDA file gets without a GPU
    if DATA["verdicts"]:
        DATA["verdicts"][-1]["note"] = "dry: a FAIL without a GPU is expected"
    flush()
    wrong = [r for r in DATA["correctness"] if not (r["ok"] and r["deterministic"])]
    log(f"dry run done: {len(DATA['correctness'])} cases, {len(wrong)} wrong, "
        f"{len(DATA['errors'])} errors")  # fmt: skip
    return 1 if wrong or DATA["errors"] else 0


def main() -> int:
    global OUT
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("outdir", type=Path)
    ap.add_argument("--dry", action="store_true", help="no GPU: files, build, CPU stand-ins")
    ap.add_argument("--quick-harness", action="store_true", help="the harness's --quick sizes")
    ap.add_argument("--no-harness", action="store_true")
    ap.add_argument("--no-variants", action="store_true")
    args = ap.parse_args()
    OUT = args.outdir
    if args.dry:
        return dry_run()
    import torch

    if not torch.cuda.is_available():
        print("no GPU here: use --dry", file=sys.stderr)
        return 2
    DATA.update(gpu=torch.cuda.get_device_name(), torch=torch.__version__, cwd=str(ROOT))
    log(f"{DATA['gpu']}, torch {torch.__version__}, cwd {ROOT}")
    variants = ["old", "new"] + ([] if args.no_variants else [*VARIANTS, *CORNERS])
    checker = None
    if not args.no_harness:  # its own process and build; beside the correctness step
        checker = threading.Thread(target=harness, args=(args.quick_harness,), daemon=True)
        checker.start()
    prewarm(variants)
    mods = {v: step(f"load {v}")(load_module)(v) for v in variants}
    correctness({k: m for k, m in mods.items() if k != "old" and not k.startswith("old-")},
                "cuda", False)  # fmt: skip
    if checker is not None:
        checker.join(timeout=max(left() - 45, 5))
        if checker.is_alive():
            DATA["notes"].append("harness still running when timing began: timings may be off")
    timing(mods)
    if left() > 8:
        host(mods)
    else:
        DATA["notes"].append("host timing skipped, out of budget")
    if checker is not None and checker.is_alive():
        checker.join(timeout=max(left(), 1))
    flush()
    print(markdown())
    log("done")
    return 0


if __name__ == "__main__":
    sys.exit(main())
