# ruff: noqa: B023, RUF059
# The script behind the results file of the same prefix, as it ran on the GPU (ruff's fixes
# and formatting applied since; each lambda is timed before its loop moves on, hence B023).
"""One-call GPU check of the wgmma matmul starter (.devrun/wgmma/matmul_new.py) against the old
mma.sync starter (kernels/cuda/matmul.py) and cuBLAS.

    python3 .devrun/wgmma/measure.py OUTDIR        (from the repository root)

Steps, each in try/except so one failure does not hide the others, results written to
OUTDIR/wgmma.md and OUTDIR/wgmma.json after every step:
  1. build old, new and a few alternative configs of new, in parallel (warms the builder cache);
  2. correctness of the new file in a CHILD process (an illegal address poisons the CUDA context
     of the process it happens in): float64 reference, project tolerances, bf16/fp16/fp32,
     offset views, a canary buffer around C for the wgmma kernel, a deterministic re-run, and the
     alternative configs on two shapes;
  3. timing (autokernel.timing.measure) of cuBLAS and the old kernel first, then the new one,
     then the alternative configs; TFLOPS and % of cuBLAS;
  4. the five-stage harness on the new file (the path `autokernel bench` takes).
Budget: under 150 s; the harness gets what is left.
"""

from __future__ import annotations

import concurrent.futures as cf
import importlib.util
import json
import os
import subprocess
import sys
import time
import traceback
from pathlib import Path

T0 = time.time()
BUDGET_S = 150.0
sys.path.insert(0, os.getcwd())
HERE = Path(__file__).resolve().parent
NEW = HERE / "matmul_new.py"
OLD = Path(os.getcwd()) / "kernels" / "cuda" / "matmul.py"

CHECK_SHAPES = [(4096, 4096, 4096), (4095, 4097, 4096), (1, 1, 1), (17, 33, 65),
                (4096, 50257, 768), (128, 8, 16), (2048, 2048, 40)]  # fmt: skip
TIME_SHAPES = [(4096, 4096, 4096), (8192, 8192, 8192), (4095, 4097, 4096), (4096, 50257, 768),
               (4096, 14336, 4096)]  # fmt: skip
# NOFENCE (not a CONFIG key): the starter's source without the fence.proxy.async after the
# cp.async wait. The PTX memory model asks for that fence (cp.async writes are generic-proxy, wgmma
# reads through the async proxy); Triton's cp.async + wgmma pipelines emit none. Timed to see what
# the fence costs, not a proposal to drop it unless it is both free of errors and much faster.
ALT_CONFIGS = [{"HWG": 2, "HSTAGES": 3}, {"HWG": 2, "HSTAGES": 4, "GROUP_M": 16},
               {"HWG": 1, "HSTAGES": 4}, {"HWG": 1, "HSTAGES": 5}, {"NOFENCE": 1}]  # fmt: skip
FENCE = 'asm volatile("fence.proxy.async.shared::cta;\\n" ::: "memory");'


def variant(src: str, cfg: dict, alt: dict) -> tuple[str, dict]:
    """Source and CONFIG of an alternative: CONFIG overrides, NOFENCE drops the proxy fence."""
    alt = dict(alt)
    if alt.pop("NOFENCE", 0):
        assert FENCE in src, "the fence line moved: update FENCE"
        src = src.replace(FENCE, "")
    return src, {**cfg, **alt}


ALT_TIME_SHAPES = [(4096, 4096, 4096), (8192, 8192, 8192)]


def elapsed() -> float:
    return round(time.time() - T0, 1)


def log(*a) -> None:
    print(f"[{elapsed():6.1f}s]", *a, flush=True)


def load_path(name: str, path: Path):
    spec = importlib.util.spec_from_file_location(name, path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def literals(path: Path) -> tuple[str, dict]:
    from autokernel.harness.guards import literal_assignment

    text = path.read_text()
    return literal_assignment(text, "CUDA_SOURCE"), literal_assignment(text, "CONFIG")


def wg_geometry(cfg: dict) -> tuple[int, int, int]:
    """(rows per block, threads, dynamic shared bytes) of the wgmma kernel at cfg, as
    matmul_new.py computes them."""
    hbm, threads = 64 * cfg["HWG"], 128 * cfg["HWG"]
    stage = 128 * (hbm + 256)
    return hbm, threads, min(cfg["HSTAGES"], (227 * 1024 - 1024) // stage) * stage + 1024


def wg_launch(module, cfg, A, B, C, ldc=None):
    """The wgmma kernel of a built module at cfg, directly (rows of A and B 16-byte aligned)."""
    import torch

    (m, n), k = C.shape, A.shape[1]  # C's shape: B may be a padded copy wider than N
    hbm, threads, shared = wg_geometry(cfg)
    kern = module.matmul_wg_bf16 if A.dtype == torch.bfloat16 else module.matmul_wg_f16
    kern(-(-m // hbm) * -(-n // 256), threads, A, B, C, m, n, k, A.stride(0), B.stride(0),
         ldc if ldc is not None else C.stride(0), shared=shared)  # fmt: skip


def inputs(m, n, k, dtype, seed=0):
    """As the matmul spec makes them: A unit scale, B of std 1/sqrt(K) (outputs O(1))."""
    import torch

    g = torch.Generator(device="cuda").manual_seed(seed)
    a = torch.randn((m, k), generator=g, device="cuda", dtype=torch.float32).to(dtype)
    b = (torch.randn((k, n), generator=g, device="cuda", dtype=torch.float32) * k**-0.5).to(dtype)
    return a, b


def compare(got, a, b) -> dict:
    import torch

    from autokernel.specs import TOLERANCES

    want = a.double() @ b.double()
    atol, rtol = TOLERANCES[a.dtype]
    err = (got.double() - want).abs()
    ok = bool(torch.allclose(got.double(), want, atol=atol, rtol=rtol)) and got.dtype == a.dtype
    bad = int((err > atol + rtol * want.abs()).sum())
    return {"ok": ok, "max_abs_err": float(err.max()) if err.numel() else 0.0, "n_bad": bad,
            "atol": atol, "rtol": rtol}  # fmt: skip


def new_path(mod, a, b) -> str:
    """Which path matmul_new's kernel_fn takes for these operands (its own dispatch rule)."""
    import torch

    if a.dtype == torch.float32:
        return "fp32"
    m, k = a.shape
    n = b.shape[1]
    a2 = a if a.stride(1) == 1 else a.contiguous()
    b2 = b if b.stride(1) == 1 else b.contiguous()
    av = a2.data_ptr() % 16 == 0 and a2.stride(0) % 8 == 0
    bv = b2.data_ptr() % 16 == 0 and b2.stride(0) % 8 == 0
    if mod._SM90 and (av or n >= mod.PAD_MIN) and (bv or m >= mod.PAD_MIN):
        return "wgmma" + ("" if av and bv else " (padded copy)")
    return "general (mma.sync)"


# ---------------------------------------------------------------- child: correctness of new
def child_check(out_json: Path) -> None:
    import torch

    res: dict = {"cases": [], "canary": [], "determinism": [], "alt": [], "errors": []}

    def save():
        out_json.write_text(json.dumps(res, indent=1))

    try:
        mod = load_path("mm_new", NEW)
        res["sm90"] = bool(mod._SM90)
    except Exception:
        res["errors"].append("import new: " + traceback.format_exc())
        save()
        return
    for dtype in (torch.bfloat16, torch.float16, torch.float32):
        for m, n, k in CHECK_SHAPES:
            case = {"shape": f"{m}x{n}x{k}", "dtype": str(dtype).removeprefix("torch."), "view": ""}
            try:
                a, b = inputs(m, n, k, dtype)
                case["path"] = new_path(mod, a, b)
                case.update(compare(mod.kernel_fn(a, b), a, b))
                torch.cuda.synchronize()
            except Exception as exc:
                case.update(ok=False, error=f"{type(exc).__name__}: {exc}")
            res["cases"].append(case)
            log("check", case)
            save()
    # views: A with an aligned row offset and a padded row stride; A one element off (rows not
    # 16-byte aligned: padded copy or general path); B a column slice of a wider matrix (rows
    # aligned, N odd: the last chunk partial); A transposed (not unit-stride: copied).
    for dtype in (torch.bfloat16, torch.float16):
        for m, n, k, view in [(1000, 1032, 1000, "A rows offset, lda=K+16"),
                              (777, 1500, 1000, "A one element off"),
                              (600, 4097, 512, "B column slice, ldb=4104"),
                              (64, 96, 520, "A one element off, small"),
                              (512, 512, 512, "A transposed view")]:  # fmt: skip
            case = {"shape": f"{m}x{n}x{k}", "dtype": str(dtype).removeprefix("torch."),
                    "view": view}  # fmt: skip
            try:
                a, b = inputs(m, n, k, dtype, seed=1)
                if view.startswith("A rows offset"):
                    big = torch.zeros((m + 3, k + 16), device="cuda", dtype=dtype)
                    big[3:, 8 : 8 + k] = a
                    a = big[3:, 8 : 8 + k]
                elif view.startswith("A one element off"):
                    big = torch.zeros((m, k + 1), device="cuda", dtype=dtype)
                    big[:, 1:] = a
                    a = big[:, 1:]
                elif view.startswith("B column slice"):
                    big = torch.zeros((k, 4104), device="cuda", dtype=dtype)
                    big[:, :n] = b
                    b = big[:, :n]
                elif view.startswith("A transposed"):
                    a = a.t().contiguous().t()
                case["path"] = new_path(mod, a, b)
                case.update(compare(mod.kernel_fn(a, b), a, b))
                torch.cuda.synchronize()
            except Exception as exc:
                case.update(ok=False, error=f"{type(exc).__name__}: {exc}")
            res["cases"].append(case)
            log("check", case)
            save()
    # canary: the wgmma kernel alone writes C as a view inside a buffer of 7s (8 spare columns,
    # 64 spare rows); nothing outside C may change.
    if res.get("sm90"):
        for m, n, k in [(4095, 4097, 4096), (130, 72, 64), (77, 3008, 1000), (5, 8, 24),
                        (1, 1, 8), (300, 520, 4104)]:  # fmt: skip
            case = {"shape": f"{m}x{n}x{k}"}
            try:
                a, b = inputs(m, n, k, torch.bfloat16, seed=2)
                b3 = b if (n % 8 == 0) else mod._padded(b)
                buf = torch.full((m + 64, n + 8), 7.0, device="cuda", dtype=torch.bfloat16)
                c = buf[:m, :n]
                wg_launch(mod._MOD, mod.CONFIG, a, b3, c, ldc=n + 8)
                torch.cuda.synchronize()
                case["canary_ok"] = bool(torch.all(buf[:, n:] == 7.0) and torch.all(buf[m:] == 7.0))
                case.update(compare(c, a, b))
            except Exception as exc:
                case.update(ok=False, error=f"{type(exc).__name__}: {exc}")
            res["canary"].append(case)
            log("canary", case)
            save()
    for m, n, k in [(4096, 4096, 4096), (4095, 4097, 4096)]:
        case = {"shape": f"{m}x{n}x{k}"}
        try:
            a, b = inputs(m, n, k, torch.bfloat16, seed=3)
            c1, c2 = mod.kernel_fn(a, b), mod.kernel_fn(a, b)
            case["bitwise_equal"] = bool(torch.equal(c1, c2))
        except Exception as exc:
            case["error"] = f"{type(exc).__name__}: {exc}"
        res["determinism"].append(case)
        log("determinism", case)
        save()
    if res.get("sm90"):
        from autokernel import cuda_build

        src, base = literals(NEW)
        for alt in ALT_CONFIGS:
            src_v, cfg = variant(src, base, alt)
            for m, n, k in [(4096, 4096, 4096), (1000, 1032, 1000)]:
                case = {"config": alt, "shape": f"{m}x{n}x{k}"}
                try:
                    module = cuda_build.load(src_v, cfg)
                    a, b = inputs(m, n, k, torch.bfloat16, seed=4)
                    c = torch.empty((m, n), device="cuda", dtype=torch.bfloat16)
                    wg_launch(module, cfg, a, b, c)
                    torch.cuda.synchronize()
                    case.update(compare(c, a, b))
                except Exception as exc:
                    case.update(ok=False, error=f"{type(exc).__name__}: {exc}")
                res["alt"].append(case)
                log("alt", case)
                save()
    res["done"] = True
    save()


# ---------------------------------------------------------------- parent
class Report:
    def __init__(self, outdir: Path):
        self.outdir = outdir
        self.data: dict = {"steps": {}, "errors": []}

    def error(self, step: str) -> None:
        tb = traceback.format_exc()
        log(f"ERROR in {step}:\n{tb}")
        self.data["errors"].append({"step": step, "traceback": tb[-3000:]})
        self.write()

    def write(self) -> None:
        self.data["elapsed_s"] = elapsed()
        try:
            (self.outdir / "wgmma.json").write_text(json.dumps(self.data, indent=1, default=str))
            (self.outdir / "wgmma.md").write_text(self.markdown())
        except Exception:
            traceback.print_exc()

    def markdown(self) -> str:
        d = self.data
        lines = ["# wgmma matmul starter: one-call GPU check", ""]
        lines.append(f"device: {d.get('device', '?')}; elapsed {d.get('elapsed_s')} s")
        builds = d["steps"].get("build")
        if builds:
            lines += ["", "## builds", ""] + [f"- {k}: {v}" for k, v in builds.items()]
        chk = d["steps"].get("check") or {}
        if chk:
            cases = chk.get("cases", [])
            bad = [c for c in cases if not c.get("ok")]
            lines += ["", f"## correctness (child process; rc {chk.get('rc')}): "
                      f"{len(cases) - len(bad)}/{len(cases)} cases pass", "",
                      "| shape | dtype | view | path | ok | max abs err | error |",
                      "|---|---|---|---|---|---|---|"]  # fmt: skip
            for c in cases:
                lines.append(f"| {c.get('shape')} | {c.get('dtype')} | {c.get('view', '')} | "
                             f"{c.get('path', '')} | {c.get('ok')} | "
                             f"{c.get('max_abs_err', float('nan')):.3g} | "
                             f"{c.get('error', '')} |")  # fmt: skip
            if chk.get("canary"):
                lines += ["", "canary (wgmma kernel, C inside a buffer of 7s):", ""]
                lines += [f"- {c}" for c in chk["canary"]]
            if chk.get("determinism"):
                lines += ["", "determinism:", ""] + [f"- {c}" for c in chk["determinism"]]
            if chk.get("alt"):
                lines += ["", "alternative configs, correctness:", ""]
                lines += [f"- {c}" for c in chk["alt"]]
            if chk.get("errors") or chk.get("stderr_tail"):
                lines += ["", "child errors:", "", "```",
                          *(chk.get("errors") or []), chk.get("stderr_tail", ""), "```"]  # fmt: skip
        tim = d["steps"].get("timing") or {}
        if tim:
            lines += ["", "## timing, bf16 (autokernel.timing.measure: do_bench median, L2 "
                      "flushed)", "",
                      "| shape | cuBLAS TFLOPS | old TFLOPS | old % | new TFLOPS | new % | "
                      "new path |", "|---|---|---|---|---|---|---|"]  # fmt: skip
            for shape, r in tim.items():

                def f(x):
                    return "-" if x is None else f"{x:.0f}"

                lines.append(f"| {shape} | {f(r.get('cublas'))} | {f(r.get('old'))} | "
                             f"{f(r.get('old_pct'))} | {f(r.get('new'))} | "
                             f"{f(r.get('new_pct'))} | {r.get('new_path', '')} |")  # fmt: skip
        alt = d["steps"].get("alt_timing") or {}
        if alt:
            lines += ["", "## alternative configs (wgmma kernel launched directly), TFLOPS", ""]
            for name, r in alt.items():
                lines.append(f"- {name}: {r}")
            if d.get("best_config"):
                lines.append(f"\nbest at 4096^3: {d['best_config']}")
        h = d["steps"].get("harness")
        if h:
            lines += ["", "## five-stage harness (autokernel bench path) on the new file", ""]
            lines.append(f"verdict: **{h.get('status')}** {h.get('message', '')}")
            for s in h.get("stages", []):
                lines.append(f"- {s}")
            for t in h.get("timings", []):
                lines.append(f"- timing: {t}")
        if d["errors"]:
            lines += ["", "## errors", ""]
            for e in d["errors"]:
                lines += [f"### {e['step']}", "```", e["traceback"], "```"]
        return "\n".join(lines) + "\n"


def tflops(m, n, k, us):
    return 2.0 * m * n * k / (us * 1e-6) / 1e12


def main(outdir: Path) -> None:
    outdir.mkdir(parents=True, exist_ok=True)
    rep = Report(outdir)
    rep.write()
    import torch

    try:
        rep.data["device"] = (f"{torch.cuda.get_device_name()} cc "
                              f"{torch.cuda.get_device_capability()}, torch {torch.__version__}, "
                              f"CUDA {torch.version.cuda}")  # fmt: skip
        log(rep.data["device"])
    except Exception:
        rep.error("device")

    # 1. builds, in parallel (nvcc is one process per build)
    try:
        from autokernel import cuda_build

        nvcc = cuda_build.find_nvcc()
        ver = cuda_build.nvcc_version(nvcc)
        jobs = {}
        src_old, cfg_old = literals(OLD)
        src_new, cfg_new = literals(NEW)
        jobs["old"] = (src_old, cfg_old)
        jobs["new"] = (src_new, cfg_new)
        for alt in ALT_CONFIGS:
            jobs[f"new {alt}"] = variant(src_new, cfg_new, alt)
        dev = torch.cuda.current_device()

        def build(item):
            name, (src, cfg) = item
            t = time.time()
            flags = cuda_build.build_flags(cfg, dev)
            key = cuda_build.cache_key(src, flags, ver)
            _, compile_s = cuda_build._cached_or_built(key, src, nvcc, flags)
            return name, {"compile_s": compile_s, "wall_s": round(time.time() - t, 1)}

        builds = {}
        with cf.ThreadPoolExecutor(max_workers=len(jobs)) as pool:
            futs = [pool.submit(build, it) for it in jobs.items()]
            for fut in futs:
                try:
                    name, info = fut.result()
                    builds[name] = info
                except Exception as exc:
                    builds[str(fut)] = f"FAILED: {type(exc).__name__}: {str(exc)[:1500]}"
        rep.data["steps"]["build"] = builds
        log("builds", builds)
        rep.write()
    except Exception:
        rep.error("build")

    # 2. correctness of the new file in a child process
    try:
        child_json = outdir / "wgmma_check.json"
        if child_json.exists():
            child_json.unlink()
        proc = subprocess.run([sys.executable, __file__, "--check", str(child_json)],
                              capture_output=True, text=True, timeout=75)  # fmt: skip
        chk = json.loads(child_json.read_text()) if child_json.exists() else {}
        chk["rc"] = proc.returncode
        chk["stderr_tail"] = proc.stderr[-2500:]
        print(proc.stdout[-6000:])
        rep.data["steps"]["check"] = chk
        rep.write()
    except Exception:
        rep.error("check (child)")
    chk = rep.data["steps"].get("check") or {}
    child_crashed = chk.get("rc") not in (0, None) or not chk.get("done")
    errors = " ".join(str(c.get("error", "")) for part in ("cases", "canary", "alt")
                      for c in chk.get(part, []))  # fmt: skip
    # a fault in the child (illegal address, launch failure) would poison this process too:
    # then the new kernel is not run here at all, the harness still judges it in its sandbox
    poisoned = child_crashed or any(
        w in errors
        for w in ("illegal", "CUDA error", "misaligned", "AcceleratorError", "launch failure")
    )
    rep.data["new_kernel_run_in_parent"] = not poisoned
    if poisoned:
        log("the correctness child faulted or did not finish: new-kernel timing skipped")

    # 3. timing: cuBLAS and old first (a fault in new cannot take them), then new
    from autokernel.timing import measure

    timing: dict = {}
    rep.data["steps"]["timing"] = timing
    old = new = None
    try:
        old = load_path("mm_old", OLD)
    except Exception:
        rep.error("import old")
    try:
        new = load_path("mm_new", NEW)
    except Exception:
        rep.error("import new")
    data = {}
    for m, n, k in TIME_SHAPES:
        key = f"{m}x{n}x{k}"
        r = timing.setdefault(key, {})
        try:
            a, b = inputs(m, n, k, torch.bfloat16)
            data[key] = (a, b)
            r["cublas"] = tflops(m, n, k, measure(lambda: torch.matmul(a, b), True).median_us)
            if old is not None:
                r["old"] = tflops(m, n, k, measure(lambda: old.kernel_fn(a, b), True).median_us)
                r["old_pct"] = 100 * r["old"] / r["cublas"]
            log("timing", key, r)
        except Exception:
            rep.error(f"timing cublas/old {key}")
        rep.write()
    for m, n, k in TIME_SHAPES:
        key = f"{m}x{n}x{k}"
        r = timing[key]
        try:
            if new is None or key not in data or poisoned:
                continue
            a, b = data[key]
            r["new_path"] = new_path(new, a, b)
            r["new"] = tflops(m, n, k, measure(lambda: new.kernel_fn(a, b), True).median_us)
            if r.get("cublas"):
                r["new_pct"] = 100 * r["new"] / r["cublas"]
            log("timing", key, r)
        except Exception:
            rep.error(f"timing new {key}")
        rep.write()

    # alternative configs of the wgmma kernel, launched directly
    alt_t: dict = {}
    rep.data["steps"]["alt_timing"] = alt_t
    try:
        from autokernel import cuda_build

        src_new, cfg_new = literals(NEW)
        ok_alt = {json.dumps(c["config"], sort_keys=True) for c in chk.get("alt", [])
                  if c.get("ok")}  # fmt: skip
        cands = [] if poisoned else [{}, *ALT_CONFIGS]
        for alt in cands:
            name = "CONFIG" if not alt else json.dumps(alt, sort_keys=True)
            if alt and name not in ok_alt:
                alt_t[name] = "skipped: not correct in the child check"
                continue
            try:
                src_v, cfg = variant(src_new, cfg_new, alt)
                module = cuda_build.load(src_v, cfg)
                row = {}
                for m, n, k in ALT_TIME_SHAPES:
                    key = f"{m}x{n}x{k}"
                    a, b = data.get(key) or inputs(m, n, k, torch.bfloat16)
                    c = torch.empty((m, n), device="cuda", dtype=torch.bfloat16)
                    row[key] = round(tflops(m, n, k, measure(
                        lambda: wg_launch(module, cfg, a, b, c), True).median_us), 1)  # fmt: skip
                alt_t[name] = row
                log("alt", name, row)
            except Exception:
                rep.error(f"alt config {name}")
            rep.write()
        scored = [(v["4096x4096x4096"], k) for k, v in alt_t.items() if isinstance(v, dict)
                  and "4096x4096x4096" in v]  # fmt: skip
        if scored:
            rep.data["best_config"] = f"{max(scored)[1]}: {max(scored)[0]} TFLOPS"
    except Exception:
        rep.error("alt configs")
    rep.write()

    # 4. the five-stage harness on the new file
    try:
        from autokernel.harness.sandbox import Options, evaluate

        left = BUDGET_S - (time.time() - T0) - 5
        log(f"harness: {left:.0f} s left")
        verdict = evaluate(NEW, Options(prestart=False, quick=True, compile_baseline=False,
                                        timeout_s=max(45.0, left)))  # fmt: skip
        vj = verdict.to_json()
        rep.data["steps"]["harness"] = {
            "status": vj.get("status"), "message": vj.get("message"),
            "stages": [f"{s.get('name')}: {s.get('status')} ({s.get('checks')} checks, worst "
                       f"{(s.get('worst') or {}).get('message', '')})"
                       for s in vj.get("stages", [])],
            "timings": vj.get("timings", []), "builds": vj.get("builds"),
            "stderr_tail": (vj.get("stderr_tail") or "")[-1500:],
        }  # fmt: skip
        log("harness verdict:", vj.get("status"), vj.get("message"))
        (outdir / "wgmma_verdict.json").write_text(json.dumps(vj, indent=1, default=str))
    except Exception:
        rep.error("harness")
    rep.write()
    log("done; wrote", outdir / "wgmma.md")


if __name__ == "__main__":
    if len(sys.argv) >= 3 and sys.argv[1] == "--check":
        child_check(Path(sys.argv[2]))
    else:
        main(Path(sys.argv[1] if len(sys.argv) > 1 else "wgmma_out"))
