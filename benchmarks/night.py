"""A user's night on a Hugging Face model, through the real CLI: which targets does profile
find, which does run evaluate, which does verify plug in, and is the model faster for it?

    python -m benchmarks.night --models llama,gpt2 --seconds 150 --commit SHA     # GPU
    python -m benchmarks.night --tiny --models llama --max-experiments 3          # CPU check

Per model (benchmarks.models' configs, random weights): `autokernel profile --hf-config` in a
fresh workspace, `autokernel run` (the built-in tuner) for --seconds or --max-experiments,
`autokernel verify --json`, each a subprocess as a user would type it. --only keeps the plan's
targets of the kinds named (e.g. `generic,rotary_embedding`: the ops no type but the generic
one computes, and the rotary that transformers' apply_rotary_pos_emb is) so a short night
reaches them; the rest of the model then runs as PyTorch. Output: one runner record
("night") and <out-dir>/<prefix>-night-<date>-<commit>.md.

The CLI runs from the workspace with only the `autokernel` package on its path: from the
repository root, the top-level kernels/ would stand in for Hugging Face's `kernels` package,
which recent transformers import.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import yaml

from benchmarks import runner
from benchmarks.models import GPU, TINY_BATCH, TINY_SEQ, TINY_WIDTHS, BenchError

ROOT = Path(__file__).resolve().parents[1]
STEP_TIMEOUT_S = 900


def write_config(family: str, tiny: bool, path: Path, env: dict) -> str:
    """The family's config as config.json for --hf-config; the input shape as BxS. Written by a
    child with the CLI's path, as transformers must not meet the top-level kernels/."""
    cfg_name, _, kwargs, batch, seq = GPU[family]
    if tiny:
        kwargs = {k: TINY_WIDTHS[k] for k in kwargs if k in TINY_WIDTHS} | {"vocab_size": 256}
        batch, seq = TINY_BATCH, TINY_SEQ
    code = ("import json, sys, transformers; c = getattr(transformers, sys.argv[1])"
            "(**json.loads(sys.argv[2]), use_cache=False); c.to_json_file(sys.argv[3])")  # fmt: skip
    out = subprocess.run([sys.executable, "-c", code, cfg_name, json.dumps(kwargs), str(path)],
                         cwd=path.parent, env=env, capture_output=True, text=True)  # fmt: skip
    if out.returncode:
        tail = (out.stderr.strip().splitlines() or ["?"])[-1]
        raise BenchError(f"cannot write the {family} config (needs transformers): {tail}")
    return f"{batch}x{seq}"


def cli_env(import_root: Path) -> dict[str, str]:
    """The environment with our package's link first on PYTHONPATH and the repository root off
    it (other entries, such as a folder of carried wheels, stay)."""
    env = dict(os.environ)
    keep = [p for p in env.get("PYTHONPATH", "").split(os.pathsep)
            if p and Path(p).resolve() != ROOT]  # fmt: skip
    env |= {"PYTHONPATH": os.pathsep.join([str(import_root), *keep]), "COLUMNS": "160",
            "PYTHONUNBUFFERED": "1"}  # fmt: skip
    return env


def import_root() -> Path:
    """A folder holding only links to our packages (see the module docstring)."""
    d = Path(tempfile.mkdtemp(prefix="autokernel-import-"))
    for package in ("autokernel", "benchmarks"):
        (d / package).symlink_to(ROOT / package, target_is_directory=True)
    return d


def step(ws: Path, env: dict, log: list[str], *args: str) -> subprocess.CompletedProcess:
    t0 = time.perf_counter()
    out = subprocess.run([sys.executable, "-m", "autokernel.cli", *args], cwd=ws, env=env,
                         capture_output=True, text=True, timeout=STEP_TIMEOUT_S)  # fmt: skip
    log.append(f"$ autokernel {' '.join(args)}  # rc {out.returncode}, "
               f"{time.perf_counter() - t0:.0f} s")  # fmt: skip
    tail = (out.stdout + out.stderr).strip().splitlines()[-25:]
    log += ["    " + line for line in tail]
    return out


def trim_plan(plan: Path, kinds: set[str]) -> list[str]:
    """Keep the plan's targets of `kinds`; the names kept."""
    data = yaml.safe_load(plan.read_text())
    data["targets"] = [t for t in data["targets"] if t.get("kernel_type") in kinds]
    plan.write_text(yaml.safe_dump(data, sort_keys=False))
    return [t["name"] for t in data["targets"]]


def night(family: str, args: argparse.Namespace, env: dict) -> dict:
    ws = Path(tempfile.mkdtemp(prefix=f"autokernel-night-{family}-"))
    config = ws / f"{family}.json"
    shape = write_config(family, args.tiny, config, env)
    model = ["--hf-config", str(config), "--input-shape", shape]
    log: list[str] = []
    row: dict = {"model": family, "input": shape, "workspace": str(ws)}
    out = step(ws, env, log, "profile", *model, "--iters", "2", "--warmup", "1")
    if out.returncode:
        return row | {"failed": "profile", "log": log}
    plan = yaml.safe_load((ws / "plan.yaml").read_text())
    row["planned"] = {t["name"]: t["kernel_type"] for t in plan["targets"]}
    # What bounds a gain against compile: each target's share of the eager and compiled time.
    row["shares"] = {t["name"]: {"eager": t.get("share"), "compile": t.get("compile_share")}
                     for t in plan["targets"]}  # fmt: skip
    row["profile_ms"] = {k: plan.get(k) for k in ("eager_forward_ms", "compile_forward_ms")}
    row["compile_attribution"] = plan.get("compile_attribution")
    if args.only:
        row["night_targets"] = trim_plan(ws / "plan.yaml", set(args.only.split(",")))
        if not row["night_targets"]:
            return row | {"failed": f"no target of kinds {args.only}", "log": log}
    budget = (["--max-experiments", str(args.max_experiments)] if args.max_experiments
              else ["--hours", f"{args.seconds / 3600:.4f}"])  # fmt: skip
    out = step(ws, env, log, "run", *budget, "--quiet", *(["--quick"] if args.quick else []))
    if out.returncode:
        return row | {"failed": "run", "log": log}
    rows = (ws / "results.tsv").read_text().splitlines()[1:]
    row["experiments"] = len(rows)
    out = step(ws, env, log, "verify", *model, "--mode", args.mode, "--json", "verify.json",
               *(["--cuda-graphs"] if args.cuda_graphs else []))  # fmt: skip
    if not (ws / "verify.json").exists():
        return row | {"failed": "verify", "log": log}
    if args.diagnose:
        cmd = [sys.executable, "-m", "benchmarks.forward_time", *model, "--workspace", str(ws),
               "--json", "forward.json", "--commit", args.commit or runner.tree_commit(),
               *(["--results", str(args.results)] if args.results else [])]  # fmt: skip
        t0 = time.perf_counter()
        diag = subprocess.run(cmd, cwd=ws, env=env, capture_output=True, text=True,
                              timeout=STEP_TIMEOUT_S)  # fmt: skip
        log.append(f"$ python -m benchmarks.forward_time ...  # rc {diag.returncode}, "
                   f"{time.perf_counter() - t0:.0f} s")  # fmt: skip
        log += ["    " + line for line in (diag.stdout + diag.stderr).strip().splitlines()[-12:]]
        if (ws / "forward.json").exists():
            row["forward_time"] = json.loads((ws / "forward.json").read_text())
    v = json.loads((ws / "verify.json").read_text())
    row |= {
        "verify_rc": out.returncode,
        "outputs_match": v.get("outputs_match"),
        "plugged_in": sorted(k for k, c in v["calls"].items() if c.get("kernel", 0) > 0),
        "calls": {
            k: {"kernel": c.get("kernel", 0), "fallback": c.get("fallback", 0)}
            for k, c in v["calls"].items()
        },
        "modes": {m: round(t["ms"], 4) for m, t in v.get("modes", {}).items()},
        "kept": v.get("kept", {}),
        "best_mode": v.get("best_mode"),
        "predictions": v.get("predictions", []),
        "notes": v.get("notes", []),
        "log": log,
    }
    return row


def markdown(rows: list[dict], env: dict) -> str:
    lines = [f"# A night through the CLI on Hugging Face models ({env['gpu']})", "",
             f"torch {env['torch']}, Triton {env['triton']}, commit {env['commit']}, "
             f"{env['date']}: `{env['command']}`", ""]  # fmt: skip
    for r in rows:
        lines += [f"## {r['model']} (input {r['input']})", ""]
        if r.get("failed"):
            lines.append(f"- failed at: {r['failed']}")
        planned = r.get("planned", {})
        generic = [n for n, k in planned.items() if k == "generic"]
        lines.append(f"- planned: {', '.join(f'{n} ({k})' for n, k in planned.items())}")
        lines.append(f"- generic targets planned: {', '.join(generic) or 'none'}")
        if r.get("compile_attribution"):
            lines.append(f"- profile's forwards: {r.get('profile_ms')}; compiled shares by "
                         f"{r['compile_attribution']}")  # fmt: skip
        shares = r.get("shares", {})
        if shares:
            lines.append("- share of the profiled time, eager / compiled: " + ", ".join(
                f"{n} {_pct(s['eager'])} / {_pct(s['compile'])}" for n, s in shares.items()))  # fmt: skip
        if "night_targets" in r:
            lines.append(f"- the night's targets (--only): {', '.join(r['night_targets'])}")
        if "experiments" in r:
            lines.append(f"- experiments: {r['experiments']}")
        if "plugged_in" in r:
            lines.append(f"- plugged in by verify (kernel calls > 0): "
                         f"{', '.join(r['plugged_in']) or 'none'}; outputs match: "
                         f"{r['outputs_match']}")  # fmt: skip
            lines.append(f"- kept for speed: {r['kept']}; best mode: {r['best_mode']}")
            lines.append("- ms per forward: " + ", ".join(f"{m} {ms:.3f}"
                                                         for m, ms in r["modes"].items()))  # fmt: skip
            for f in r.get("forward_time", []):
                lines.append(f"- {f['variant']}: wall {f['wall_ms']:.3f} ms, host {f['host_ms']:.3f}"
                             f" ms, GPU {f['gpu_ms']:.3f} ms")  # fmt: skip
            for p in r["predictions"]:
                lines.append(f"- prediction ({p['source']}, {p['mode']}): {p['predicted_ms']:.3f} "
                             f"ms vs {p['measured_ms']:.3f} measured ({p['miss']:+.0%})")  # fmt: skip
        lines += ["", "```", *r.get("log", []), "```", ""]
    return "\n".join(lines) + "\n"


def _pct(x: float | None) -> str:
    return "-" if x is None else f"{x:.1%}"


def main(argv: list[str] | None = None) -> int:
    import torch

    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--models", default="llama,gpt2", help="comma list of " + ", ".join(GPU))
    ap.add_argument("--seconds", type=float, default=150.0, help="each night's --hours")
    ap.add_argument("--max-experiments", type=int, default=0, help="instead of --seconds")
    ap.add_argument("--only", default="", help="kernel kinds to keep in the plan")
    ap.add_argument("--mode", choices=("eager", "compile"), default="eager",
                    help="verify's selection mode")  # fmt: skip
    ap.add_argument("--cuda-graphs", action="store_true")
    ap.add_argument("--quick", action="store_true", help="run --quick")
    ap.add_argument(
        "--diagnose",
        action="store_true",
        help="after verify, host and GPU time per forward (benchmarks.forward_time)",
    )
    ap.add_argument("--tiny", action="store_true", help="tiny configs (CPU check)")
    ap.add_argument("--out-dir", type=Path, default=ROOT / "benchmarks" / "results")
    args = runner.add_arguments(ap).parse_args(argv)
    families = [f for f in args.models.split(",") if f]
    if unknown := [f for f in families if f not in GPU]:
        print(f"error: --models {','.join(unknown)}: use some of {', '.join(GPU)}", file=sys.stderr)
        return 2
    if not torch.cuda.is_available() and not args.tiny:
        print("error: no CUDA: full sizes under the Triton interpreter take hours; use --tiny",
              file=sys.stderr)  # fmt: skip
        return 2
    env_info = runner.environment(args.commit)
    env = cli_env(import_root())
    rows = []
    try:
        for family in families:
            rows.append(night(family, args, env))
            print(json.dumps({k: v for k, v in rows[-1].items() if k != "log"}), flush=True)
    except BenchError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    text = markdown(rows, env_info)
    args.out_dir.mkdir(parents=True, exist_ok=True)
    prefix = runner.slug(env_info["gpu"])
    name = f"{prefix}-night-{dt.date.today().isoformat()}-{env_info['commit']}.md"
    (args.out_dir / name).write_text(text)
    runner.record("night", [{k: v for k, v in r.items() if k != "log"} for r in rows], text,
                  commit=args.commit, results=args.results)  # fmt: skip
    return 0 if all(not r.get("failed") for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
