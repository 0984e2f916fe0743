"""Old vs new CUDA reduce starter (issue 17): correctness against reference.py (float64) at many
shapes, dtypes and views, bitwise determinism, timing against a device copy of the same bytes,
CONFIG variants of the new file's narrow path, and the five-stage harness on the new file.

Run from a repository root on the GPU (old file: kernels/cuda/reduce.py there; new file:
reduce_new.py beside this script):
    python3 .devrun/red2/measure.py OUTDIR [--no-harness] [--no-variants] [--full-harness] [--dry]
Writes OUTDIR/red2.md and OUTDIR/red2.json (also when a step fails: every step is in try/except,
and steps are skipped past DEADLINE_S so the run ends within 120 s). --dry (no GPU needed):
argument handling, the files, the variants' sources (guard, CONFIG inside SEARCH_SPACE), and
the launch plans of the new file and its variants on an H100-like device (132 SMs, 64
registers a thread), checked against the kernel's assumptions, with the bytes each SM has in
flight at 262144x128 bf16 beside the old file's.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import re
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
DEADLINE_S = 100.0  # steps not started by then are skipped (the whole run: within 120 s)
FILES = {"old": ROOT / "kernels" / "cuda" / "reduce.py", "new": HERE / "reduce_new.py"}
# CONFIG corners of the new file's narrow path: key -> value replacing the new file's.
VARIANTS = {
    "new-r4": {"ROWS": 4},  # 64 B in flight a thread, as the old file at 128 bf16 columns
    "new-np": {"PERSIST": 0},  # one ROWS-deep step a warp, the grid as large as the rows need
    "new-nohint": {"CACHE_HINT": 0},  # plain __ldg (ld.global.nc) instead of no_allocate/256B
}
NARROW = (262144, 128)  # the goal size: >= 85 % of the copy ceiling
SIZES = [NARROW, (4096, 50257), (16384, 8192), (4096, 4096)]
INFO_SIZES = [(262144, 127), (1048576, 32)]  # old and new only, if time is left
ROUNDS = 2  # the narrow size is timed this many times, interleaved (copy, old, new, variants)
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
    """The file's text; a variant is the new file with CONFIG values replaced (in CONFIG's
    literal only, checked by reading it back)."""
    if variant not in VARIANTS:
        return FILES[variant].read_text()
    from autokernel.harness.guards import literal_assignment

    text = FILES["new"].read_text()
    start = text.index("CONFIG = {")
    end = text.index("}", start) + 1
    block = text[start:end]
    want = dict(literal_assignment(text, "CONFIG"))
    for key, value in VARIANTS[variant].items():
        block, n = re.subn(rf'("{key}":\s*)[^,\n}}]+', rf"\g<1>{value!r}", block)
        assert n == 1, f"{variant}: {key} not found once in CONFIG"
        want[key] = value
    text = text[:start] + block + text[end:]
    assert literal_assignment(text, "CONFIG") == want, f"{variant}: CONFIG not as meant"
    return text


def load_module(variant: str) -> types.ModuleType:
    """The kernel file as a fresh module (its own name, so old, new and variants coexist)."""
    name = f"red2_{variant.replace('-', '_')}"
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


def plan_of(mod, x2):
    """(path, plan): the new file's launch plan for the 2-D view x2, or the old file's."""
    rows, cols = x2.shape
    if hasattr(mod, "launch_plan"):
        aligned = x2.data_ptr() % 16 == 0
        plan = mod.launch_plan(rows, cols, x2.stride(0), aligned, x2.dtype, mod.CONFIG, x2.device)
        narrow = any(plan[0] is k for k in mod._NARROW.values())
        return ("narrow" if narrow else "rows"), plan[1:]
    return "rows", mod.rows_plan(rows, cols, x2.element_size(), mod.CONFIG)


@step("kernel facts")
def kernel_facts(mods, facts):
    """Registers and local memory of each narrow kernel, and the plan at the goal size."""
    import torch

    for variant, mod in mods.items():
        if mod is None:
            continue
        kernels = getattr(mod, "_NARROW", None) or mod._KERNELS
        regs = {str(d).split(".")[-1]: (k.num_regs, k.local_bytes) for d, k in kernels.items()}
        x = torch.empty(NARROW, dtype=torch.bfloat16, device="cuda")
        path, plan = plan_of(mod, x)
        fact = {"variant": variant, "regs_local": regs, "path": path, "plan": list(plan),
                "config": mod.CONFIG}  # fmt: skip
        if path == "narrow":
            grid, block, chunk, lg = plan
            sms = torch.cuda.get_device_properties(0).multi_processor_count
            per_sm = mod.blocks_per_sm(kernels[torch.bfloat16].num_regs, mod.CONFIG["NARROW_BLOCK"])
            resident = min(grid, sms * per_sm) * block / sms  # threads an SM holds at once
            fact["kb_in_flight_per_sm"] = resident * mod.CONFIG["ROWS"] * 16 / 1024
            fact["steps_per_warp"] = -(-chunk // ((32 >> lg) * mod.CONFIG["ROWS"]))
        facts.append(fact)
        log(f"facts {variant}: {fact}")


def make_x(rows, cols, dtname, view="plain", device="cuda", seed=0):
    import torch

    dtype = getattr(torch, dtname)
    if rows * cols > 4_000_000 and view == "plain":  # drawn on the GPU (CPU: seconds)
        gd = torch.Generator(device=device).manual_seed(seed)
        return torch.randn(rows, cols, generator=gd, device=device).to(dtype)
    g = torch.Generator(device="cpu").manual_seed(seed)
    if view == "cancel":  # +-1000 alternating plus unit noise (the spec's adversarial case)
        sign = torch.ones(rows, cols)
        sign[:, 1::2] = -1
        base = 1000 * sign + torch.randn(rows, cols, generator=g)
    elif view == "positive":
        base = 1 + 3 * torch.rand(rows, cols, generator=g)
    else:
        base = torch.randn(rows, cols, generator=g)
    x = base.to(device=device, dtype=dtype)
    if view in ("strided", "strided16"):  # row stride cols + 13 (rows off 16 B), or + 16 bytes
        pad = 13 if view == "strided" else 16 // x.element_size()
        buf = torch.zeros(rows, cols + pad, dtype=dtype, device=device)
        buf[:, :cols] = x
        x = buf[:, :cols]
    elif view == "offset":  # one element into its storage (not 16-byte aligned)
        buf = torch.zeros(rows * cols + 1, dtype=dtype, device=device)
        buf[1:] = x.reshape(-1)
        x = buf[1:].view(rows, cols)
    elif view == "batched3d":
        x = torch.stack([x, -x]).contiguous()  # (2, rows, cols)
    elif view == "expanded":  # row stride 0: every row the same storage
        x = x[:1].expand(rows, cols)
    elif view == "transposed":  # last dim strided: kernel_fn copies
        x = x.t().contiguous().t()
    return x


def compare(out, x):
    """(ok, max abs error, rel_err): |out - ref| <= atol + rtol * |ref| with the spec's
    tolerances, ref = reference.reduce of the same input in float64."""
    from autokernel import reference as ref
    from autokernel.specs import get_spec

    r = ref.reduce(x.double())
    atol, rtol = get_spec("reduce").tolerance(x.dtype)
    d = (out.double() - r).abs()
    ok = bool(out.shape == r.shape and out.dtype == x.dtype and out.isfinite().all()
              and (d <= atol + rtol * r.abs()).all())  # fmt: skip
    return ok, float(d.max()), float(d.max() / r.abs().max().clamp_min(1e-30))


def correctness_cases(full: bool = True):
    """(rows, cols, dtype name, view): every narrow width up to past the limit (one vector a
    lane, 32 vectors) in each dtype, rows fewer and more than a step, strided / offset / 3-D /
    expanded / transposed views, adversarial values; full=False: a narrow subset (variants)."""
    cases = []
    widths = {"bfloat16": [1, 2, 3, 7, 8, 9, 15, 16, 17, 31, 33, 64, 100, 127, 128, 129, 249,
                           255, 256, 257, 300],
              "float16": [1, 5, 8, 17, 127, 128, 200, 256, 257],
              "float32": [1, 3, 4, 5, 31, 32, 33, 64, 125, 127, 128, 129, 200]}  # fmt: skip
    if not full:
        widths = {"bfloat16": [1, 7, 16, 17, 127, 128, 256], "float32": [1, 33, 128]}
    for dt, cols_list in widths.items():
        for cols in cols_list:
            for rows in (1, 37, 4099) if full else (1, 4099):
                cases.append((rows, cols, dt, "plain"))
    views = ("strided", "strided16", "offset", "batched3d", "expanded", "transposed", "cancel",
             "positive")  # fmt: skip
    for view in views if full else ("strided", "offset"):
        for rows, cols, dt in [(133, 128, "bfloat16"), (77, 127, "float16"), (50, 33, "float32"),
                               (9, 1000, "bfloat16")]:  # fmt: skip
            cases.append((rows, cols, dt, view))
    if full:
        cases += [(262144, 128, "bfloat16", "plain"), (100003, 128, "float32", "plain"),
                  (1000003, 1, "bfloat16", "plain"), (1 << 20, 8, "float16", "plain"),
                  (65537, 256, "bfloat16", "offset"), (257, 50257, "bfloat16", "plain"),
                  (33, 8192, "float32", "strided"), (5, 131072, "float16", "plain")]  # fmt: skip
    return cases


@step("correctness")
def correctness(mods, results):
    """Each case run three times (bitwise equal: deterministic); the wide path ("rows") of the
    new file should also match the old bit for bit (the same kernel)."""
    import torch

    for variant, mod in mods.items():
        if mod is None or variant == "old" or late():
            continue
        bad, cases = 0, correctness_cases(full=variant == "new")
        for rows, cols, dtname, view in cases:
            if late():
                ERRORS.append(f"correctness {variant}: stopped at the deadline")
                break
            label = f"{variant} {rows}x{cols} {dtname} {view}"
            same_old = None
            try:
                x = make_x(rows, cols, dtname, view, seed=rows * 7 + cols)
                outs = [mod.kernel_fn(x) for _ in range(3)]
                torch.cuda.synchronize()
                ok, err, rel = compare(outs[0], x)
                det = all(torch.equal(outs[0], o) for o in outs[1:])
                x2 = x.reshape(-1, cols)
                x2 = x2 if x2.stride(-1) == 1 else x2.contiguous()
                path, plan = plan_of(mod, x2)
                if mods.get("old") is not None:
                    same_old = bool(torch.equal(outs[0], mods["old"].kernel_fn(x)))
            except Exception as exc:
                ok, err, rel, det, path, plan = False, float("nan"), float("nan"), False, "", ()
                path = f"error {type(exc).__name__}: {exc}"
            if not (ok and det):
                bad += 1
                log(f"WRONG {label}: ok={ok} err={err:.2e} deterministic={det} {path} {plan}")
            results.append({"variant": variant, "case": f"{rows}x{cols}", "dtype": dtname,
                            "view": view, "path": path, "plan": list(plan), "ok": ok,
                            "deterministic": det, "max_abs_err": err, "rel_err": rel,
                            "same_as_old": same_old})  # fmt: skip
        log(f"correctness {variant}: {len(cases)} cases, {bad} wrong or non-deterministic")


def time_size(mods, rows_out, rows, cols, names, rnd=1):
    import torch

    from autokernel.timing import measure

    x = make_x(rows, cols, "bfloat16")
    # the spec's bytes_moved is rows * (cols + 1) elements; a copy of half that many moves
    # them (read + write), as benchmarks/cuda_backend.py's copy ceiling does
    src = torch.empty(rows * (cols + 1) // 2, dtype=x.dtype, device="cuda")
    dst = torch.empty_like(src)
    copy_us = measure(lambda d=dst, s=src: d.copy_(s), True).median_us
    size = f"{rows}x{cols}"
    rows_out.append({"variant": "copy", "size": size, "round": rnd, "us": copy_us, "pct": 100.0,
                     "rel_err": None, "ok": True, "path": ""})  # fmt: skip
    for variant in names:
        mod = mods.get(variant)
        if mod is None:
            continue
        try:
            out = mod.kernel_fn(x)
            ok, _, rel = compare(out, x)
            us = measure(lambda m=mod, a=x: m.kernel_fn(a), True).median_us
            path, plan = plan_of(mod, x)
            path = f"{path} {tuple(plan)}"
        except Exception as exc:
            log(f"FAILED timing {variant} {size}: {exc}")
            us, ok, rel, path = float("nan"), False, float("nan"), "error"
        rows_out.append({"variant": variant, "size": size, "round": rnd, "us": us,
                         "pct": 100 * copy_us / us, "rel_err": rel, "ok": ok,
                         "path": path})  # fmt: skip
        log(f"{variant:10s} {size:13s} r{rnd} {us:9.2f} us {100 * copy_us / us:6.1f} % of copy "
            f"({copy_us:.2f} us) rel_err={rel:.2e} ok={ok} {path}")  # fmt: skip
    del x, src, dst
    torch.cuda.empty_cache()


@step("timing")
def timing(mods, rows_out):
    """The goal size ROUNDS times (every variant), then the other sizes (old and new: the
    variants differ from new only on the narrow path), then INFO_SIZES while time is left."""
    variants = [v for v in mods if v not in ("old", "new")]
    plan = [(NARROW, ["old", "new", *variants], r + 1) for r in range(ROUNDS)]
    plan += [(s, ["old", "new"], 1) for s in SIZES if s != NARROW]
    plan += [(s, ["old", "new"], 1) for s in INFO_SIZES]
    for (rows, cols), names, rnd in plan:
        if late():
            ERRORS.append(f"timing {rows}x{cols} round {rnd}: skipped, past the deadline")
            continue
        try:
            time_size(mods, rows_out, rows, cols, names, rnd)
        except Exception as exc:
            ERRORS.append(f"timing {rows}x{cols}: {type(exc).__name__}: {exc}")
            log(f"FAILED timing {rows}x{cols}: {exc}")


@step("harness")
def harness(quick, verdicts):
    from autokernel.harness.sandbox import Options, evaluate

    t = time.perf_counter()
    budget = max(20.0, min(60.0, DEADLINE_S - (t - T0)))
    v = evaluate(FILES["new"], Options(timeout_s=budget, quick=quick, compile_baseline=False,
                                       prestart=False))  # fmt: skip
    verdicts.append({"status": v.status.name, "message": v.message, "quick": quick,
                     "stages": [f"{s.name}:{s.status}" for s in v.stages],
                     "seconds": round(time.perf_counter() - t, 1)})  # fmt: skip
    log(f"VERDICT reduce_new: {v.status.name} {v.message} ({time.perf_counter() - t:.1f}s)")


def table(rows) -> str:
    lines = ["| variant | size | round | µs | % of copy | rel_err | ok | path (plan) |",
             "|---|---|---|---|---|---|---|---|"]  # fmt: skip
    for r in rows:
        rel = "" if r["rel_err"] is None else f"{r['rel_err']:.2e}"
        ok = "yes" if r["ok"] else "NO"
        lines.append(f"| {r['variant']} | {r['size']} | {r['round']} | {r['us']:.2f} | "
                     f"{r['pct']:.1f} | {rel} | {ok} | {r['path']} |")  # fmt: skip
    return "\n".join(lines)


def summary(rows) -> list[str]:
    """Per size and variant: the mean of the rounds' % of copy; the goal and the no-loss check."""
    out = []
    by: dict[tuple[str, str], list[float]] = {}
    for r in rows:
        if r["variant"] != "copy" and r["us"] == r["us"]:
            by.setdefault((r["size"], r["variant"]), []).append(r["pct"])
    for (size, variant), pcts in sorted(by.items()):
        out.append(f"- {size} {variant}: {sum(pcts) / len(pcts):.1f} % of copy "
                   f"(rounds: {', '.join(f'{p:.1f}' for p in pcts)})")  # fmt: skip
    goal = by.get((f"{NARROW[0]}x{NARROW[1]}", "new"))
    if goal:
        mean = sum(goal) / len(goal)
        out.append(f"- GOAL 262144x128 new >= 85 % of copy: {'MET' if mean >= 85 else 'NOT MET'}"
                   f" ({mean:.1f} %)")  # fmt: skip
    for rows_, cols in SIZES[1:]:
        size = f"{rows_}x{cols}"
        old, new = by.get((size, "old")), by.get((size, "new"))
        if old and new:
            out.append(
                f"- {size}: new {new[0]:.1f} % vs old {old[0]:.1f} % of copy "
                f"({'no loss' if new[0] >= old[0] - 1.5 else 'LOSS'}; 1.5 points noise)"
            )
    return out


def check_narrow_plan(mod, rows, cols, stride, aligned, size, plan, resident) -> None:
    """What narrow_rows assumes of a plan (see narrow_plan and the kernel's comments)."""
    cfg, vec = mod.CONFIG, 16 // size
    grid, block, chunk, lg = plan
    g = 1 << lg
    offsets = range(1) if aligned and stride % vec == 0 else range(vec)
    worst = max((cols + m + vec - 1) // vec for m in offsets)
    assert worst <= g <= 32, (rows, cols, plan)
    assert block % 32 == 0 and 32 <= block <= cfg["NARROW_BLOCK"]
    warps = grid * block // 32
    assert warps * chunk >= rows and (grid - 1) * (block // 32) * chunk < rows
    assert chunk % (32 // g) == 0
    if cfg["PERSIST"]:
        assert grid <= resident, "a persistent grid is one wave"


def dry(out: Path) -> int:
    """No GPU: the files, the variants, and the plans the new file and its variants choose on an
    H100 (132 SMs, the narrow kernels at 64 registers as ptxas reports at the CONFIG)."""
    import torch

    from autokernel import cuda_build
    from autokernel.harness.cuda_check import tokenize
    from autokernel.harness.cuda_source import entry_points
    from autokernel.harness.guards import check_source, literal_assignment

    for variant, path in FILES.items():
        print(f"{variant}: {path} exists={path.exists()}")
    repo_new = ROOT / "kernels" / "cuda" / "reduce.py"
    print(f"new file identical to this tree's kernels/cuda/reduce.py: "
          f"{FILES['new'].read_text() == repo_new.read_text()}")  # fmt: skip
    real_load, real_props = cuda_build.load, torch.cuda.get_device_properties
    regs = 64

    def fake_load(src, cfg=None):
        names = [e.name for e in entry_points(tokenize(src))]
        return types.SimpleNamespace(
            **{n: types.SimpleNamespace(name=n, num_regs=regs, local_bytes=0) for n in names}
        )

    cuda_build.load = fake_load
    props = types.SimpleNamespace(multi_processor_count=132, shared_memory_per_block_optin=232448)
    torch.cuda.get_device_properties = lambda d=None: props
    lines, n = [], 0
    try:
        for variant in ("old", "new", *VARIANTS):
            text = source_of(variant)
            assert check_source(text) == [], f"{variant}: the guard refuses it"
            mod = load_module(variant)
            cfg, space = mod.CONFIG, literal_assignment(text, "SEARCH_SPACE")
            assert literal_assignment(text, "CONFIG") == cfg
            assert set(cfg) == set(space) and all(cfg[k] in space[k] for k in cfg), variant
            if variant == "old":
                grid, block, g = mod.rows_plan(*NARROW, 2, cfg)
                # 63 registers (ptxas at the old CONFIG): 4 blocks of 256 an SM; a row of 16
                # vectors over g = 4 threads: 4 loads of 16 B each a thread
                per_thread = -(-16 // g) * 16
                kb = 4 * 256 * per_thread / 1024
                lines.append(f"old {NARROW}: grid {grid} block {block} g {g}; in flight "
                             f"{per_thread} B a thread, {kb:.0f} KB an SM; "
                             f"{grid / (132 * 4):.2f} waves of 4 blocks an SM")  # fmt: skip
                continue
            resident = 132 * mod.blocks_per_sm(regs, cfg["NARROW_BLOCK"])
            for (rows, cols), dt, how in [
                (s, d, h) for s in [*SIZES, *INFO_SIZES, (1, 1), (3, 7), (4099, 17), (37, 256),
                                    (5, 257), (1000003, 1), (4095, 4097), (1, 50257)]
                for d in (torch.bfloat16, torch.float16, torch.float32)
                for h in ("aligned", "offset", "strided")
            ]:  # fmt: skip
                size = dt.itemsize
                aligned, stride = how != "offset", cols + (13 if how == "strided" else 0)
                plan = mod.launch_plan(rows, cols, stride, aligned, dt, cfg, "cuda")
                narrow = any(plan[0] is k for k in mod._NARROW.values())
                if narrow:
                    check_narrow_plan(mod, rows, cols, stride, aligned, size, plan[1:], resident)
                    n += 1
                else:
                    assert plan[0] is mod._KERNELS[dt] and plan[1:] == mod.rows_plan(
                        rows, cols, size, cfg
                    ), "the wide path keeps the old plan"
                    nvec = mod.row_vectors(cols, stride, aligned, size)
                    assert nvec > mod.NARROW_VECS
                if how == "aligned" and dt == torch.bfloat16:
                    lines.append(f"{variant} {rows}x{cols} {how} {dt}: "
                                 f"{'narrow' if narrow else 'rows'} {plan[1:]}")  # fmt: skip
            grid, block, chunk, lg = mod.launch_plan(*NARROW, NARROW[1], True, torch.bfloat16,
                                                     cfg, "cuda")[1:]  # fmt: skip
            threads = min(grid * block, resident * cfg["NARROW_BLOCK"]) / 132
            kb = threads * cfg["ROWS"] * 16 / 1024
            steps = -(-chunk // ((32 >> lg) * cfg["ROWS"]))
            lines.append(f"{variant} {NARROW}: grid {grid} block {block} chunk {chunk} G "
                         f"{1 << lg}; {threads:.0f} threads an SM x {cfg['ROWS']} x 16 B = "
                         f"{kb:.0f} KB in flight an SM; {steps} steps a warp")  # fmt: skip
        print("\n".join(lines))
        print(
            f"{n} narrow plans checked; {len(correctness_cases())} correctness cases for new, "
            f"{len(correctness_cases(False))} a variant; sizes {SIZES} + {INFO_SIZES}"
        )
    finally:
        cuda_build.load, torch.cuda.get_device_properties = real_load, real_props
    out.mkdir(parents=True, exist_ok=True)
    (out / "red2.md").write_text("dry run: no GPU\n\n" + "\n".join(lines) + "\n")
    (out / "red2.json").write_text(json.dumps({"dry": True, "plans": lines}, indent=1))
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

    args.outdir.mkdir(parents=True, exist_ok=True)
    if not torch.cuda.is_available():
        print("no GPU here: use --dry", file=sys.stderr)
        ERRORS.append("no GPU")
        write(args.outdir, "none", [], [], [], [])
        return 2
    gpu = torch.cuda.get_device_name()
    log(f"{gpu}, torch {torch.__version__}, cwd {ROOT}")
    variants = ["old", "new"] + ([] if args.no_variants else list(VARIANTS))
    rows: list[dict] = []
    results: list[dict] = []
    verdicts: list[dict] = []
    facts: list[dict] = []
    try:
        prewarm(variants)
        mods = {v: step(f"load {v}")(load_module)(v) for v in variants}
        kernel_facts(mods, facts)
        # The harness (a cold build in its sandbox, then its stages) runs beside the correctness
        # cases, and is waited for before the timing, which has the GPU to itself.
        pool = ThreadPoolExecutor(1)
        pending = None if args.no_harness else pool.submit(harness, not args.full_harness, verdicts)
        correctness(mods, results)
        if pending is not None:
            pending.result()
        pool.shutdown()
        timing(mods, rows)
    except BaseException as exc:  # still write what there is
        ERRORS.append(f"main: {type(exc).__name__}: {exc}")
        traceback.print_exc(limit=3)
    write(args.outdir, gpu, rows, results, verdicts, facts)
    log("done")
    return 0


def write(outdir: Path, gpu: str, rows, results, verdicts, facts) -> None:
    import torch

    wrong = [r for r in results if not (r["ok"] and r["deterministic"])]
    wide = [r for r in results if r["variant"] == "new" and r["path"] == "rows"]
    differ = [r for r in wide if r["same_as_old"] is False]
    md = [f"# CUDA reduce, old vs new ({gpu})", "",
          f"torch {torch.__version__}; autokernel.timing median (do_bench, L2 flushed), bf16; "
          "copy: a device copy (read + write) of the same bytes (rows x (cols + 1) elements); "
          f"262144x128 timed {ROUNDS} times, interleaved; timed with the GPU to itself (the "
          "harness ran beside the correctness cases, before).", "",
          table(rows), "", "Summary:", *summary(rows), "",
          f"Correctness: {len(results)} cases (new: fp16/bf16/fp32, widths 1 to 300 and wide "
          "rows, strided, offset, 3-D, expanded, transposed, cancelling and positive values; "
          f"variants: a narrow subset; each run three times): {len(wrong)} wrong or "
          f"non-deterministic. Wide-path cases bitwise equal to the old file: "
          f"{len(wide) - len(differ)} of {len(wide)}.", ""]  # fmt: skip
    md += [f"- WRONG {r}" for r in wrong[:40]]
    md += [f"- wide, differs from old: {r}" for r in differ[:10]]
    md += ["", "Kernel facts (registers, local bytes; plan at 262144x128 bf16):"]
    md += [f"- {f}" for f in facts]
    md += ["", "Five stages of the new file:"]
    md += [f"- {v['status']} {v['message']} {v['stages']} (quick={v['quick']}, {v['seconds']} s)"
           for v in verdicts]  # fmt: skip
    md += (["", "Errors:"] + [f"- {e}" for e in ERRORS]) if ERRORS else []
    text = "\n".join(md) + "\n"
    (outdir / "red2.md").write_text(text)
    (outdir / "red2.json").write_text(json.dumps(
        {"gpu": gpu, "torch": torch.__version__, "timing": rows, "correctness": results,
         "facts": facts, "verdicts": verdicts, "errors": ERRORS,
         "seconds": time.perf_counter() - T0}, indent=1, default=str))  # fmt: skip
    print(text)


if __name__ == "__main__":
    sys.exit(main())
