"""Whole Hugging Face models with our kernels plugged in, in every mode: one device call, two files.

    python -m benchmarks.models --starters --commit SHA          # H200: four models, <= 4 min
    python -m benchmarks.models --workspace runs/llama --models llama --commit SHA
    python -m benchmarks.models --tiny --starters --no-compile --out-dir /tmp/m   # CPU check

Llama-, Qwen2-, GPT-2- and BERT-family models are built from configs (random weights, bf16,
4 x 1024 tokens a forward), then each goes through verify as a user's model would
(autokernel.model.verify.verifier.verify_model and conclude): outputs against eager, the kernel selection on
the whole forward in --mode, every mode timed interleaved (eager, patched, compile,
compile+patched, and captured: cuda-graphs[+patched], compile+cuda-graphs[+patched]) and the
prediction checked. Kernels come from
--workspace (a finished run) or, with --starters, from kernels/*.py, every type plugged in wherever the model
matches it. Output: <out-dir>/<prefix>-models-<date>.md for people and
<out-dir>/<prefix>-models-latest.json for tools:
{"gpu", "torch", "triton", "commit", "date", "rows": [{"model", "tokens", "mode", "ms",
"predicted_ms", "kernels", "spread"}], "models": {name: verify's JSON}}.

Why the selection runs in eager mode by default here: in compile mode every kernel subset is a
fresh torch.compile of the model (k + 1 compiles a pass), more than four models fit in four
minutes; the compile+patched mode still passes the no-regression guard. --mode compile runs it.
Both files are rewritten after every model, so a run cut by --budget-s reports what it measured.
"""

from __future__ import annotations

import time

T0 = time.perf_counter()  # imports and CUDA start-up count against the budget

import argparse  # noqa: E402
import datetime as dt  # noqa: E402
import json  # noqa: E402
import os  # noqa: E402
import shutil  # noqa: E402
import sys  # noqa: E402
import tempfile  # noqa: E402
from pathlib import Path  # noqa: E402

import torch  # noqa: E402

if not torch.cuda.is_available():
    os.environ.setdefault("TRITON_INTERPRET", "1")  # before triton is imported: CPU kernels
ROOT = Path(__file__).resolve().parents[1]

from autokernel.model.name_shield import shield_kernels_name  # noqa: E402
from autokernel.model.verify.modes import BASE  # noqa: E402
from autokernel.model.verify.verifier import VerifyError, collect_kernels, conclude, verify_model  # noqa: E402
from benchmarks import runner  # noqa: E402

# family -> (config class, model class, config at GPU size, batch, seq)
GPU = {
    "llama": ("LlamaConfig", "LlamaForCausalLM", {
        "hidden_size": 2048, "intermediate_size": 5632, "num_hidden_layers": 4,
        "num_attention_heads": 16, "num_key_value_heads": 4, "vocab_size": 32000,
        "max_position_embeddings": 4096}, 4, 1024),
    "qwen2": ("Qwen2Config", "Qwen2ForCausalLM", {
        "hidden_size": 1536, "intermediate_size": 8960, "num_hidden_layers": 4,
        "num_attention_heads": 12, "num_key_value_heads": 2, "vocab_size": 32768,
        "max_position_embeddings": 4096}, 4, 1024),
    "gpt2": ("GPT2Config", "GPT2LMHeadModel", {
        "n_embd": 1024, "n_layer": 4, "n_head": 16, "n_positions": 1024,
        "vocab_size": 50257}, 4, 1024),
    "bert": ("BertConfig", "BertModel", {
        "hidden_size": 1024, "num_hidden_layers": 4, "num_attention_heads": 16,
        "intermediate_size": 4096, "max_position_embeddings": 1024, "vocab_size": 30522}, 4, 1024),
}  # fmt: skip
TINY_WIDTHS = {"hidden_size": 64, "intermediate_size": 128, "num_hidden_layers": 2,
               "num_attention_heads": 4, "num_key_value_heads": 2, "vocab_size": 256,
               "max_position_embeddings": 64, "n_embd": 64, "n_layer": 2, "n_head": 4,
               "n_positions": 64}  # fmt: skip
TINY_BATCH, TINY_SEQ = 2, 16
GPU_ROUNDS = 3  # interleaved rounds per mode: 3 keeps four models within the budget
MODEL_RESERVE_S = 50  # do not start a model with less budget left (two compiles, H200)


class BenchError(Exception):
    """Bad arguments or a missing dependency; one line, exit 2."""


def build(family: str, tiny: bool, device: torch.device, dtype: torch.dtype):
    """(model, [input_ids], tokens) for one family at GPU or tiny size, random weights."""
    shield_kernels_name()
    try:
        import transformers
    except ImportError:
        raise BenchError("needs the transformers package: pip install transformers") from None
    cfg_name, model_name, kwargs, batch, seq = GPU[family]
    if tiny:
        kwargs = {k: TINY_WIDTHS[k] for k in kwargs if k in TINY_WIDTHS} | {"vocab_size": 256}
        batch, seq = TINY_BATCH, TINY_SEQ
    config = getattr(transformers, cfg_name)(**kwargs, use_cache=False)
    config._attn_implementation = "sdpa"  # the F.scaled_dot_product_attention path we patch
    torch.manual_seed(0)
    with torch.device(device):
        model = getattr(transformers, model_name)(config)
    model = model.to(dtype).eval()
    ids = torch.randint(0, config.vocab_size, (batch, seq), device=device)
    return model, [ids], batch * seq


def starter_workspace(backend: str = "triton") -> Path:
    """A workspace holding every shipped starter as optimized/<type>.py; with backend "cuda",
    the CUDA C++ starter of each type that has one (kernels/cuda/), Triton's for the rest."""
    ws = Path(tempfile.mkdtemp(prefix="autokernel-starters-"))
    (ws / "optimized").mkdir()
    for path in sorted((ROOT / "kernels").glob("*.py")):
        cuda = ROOT / "kernels" / "cuda" / path.name
        if path.stem != "__init__":
            shutil.copy(cuda if backend == "cuda" and cuda.is_file() else path,
                        ws / "optimized" / path.name)  # fmt: skip
    return ws


def rows_of(name: str, tokens: int, result) -> list[dict]:
    predicted = {p["mode"]: p["predicted_ms"] for p in reversed(result.predictions)}
    return [
        {"model": name, "tokens": tokens, "mode": m, "ms": round(t["ms"], 4),
         "predicted_ms": None if m not in predicted else round(predicted[m], 4),
         "kernels": t["kernels"], "spread": round(t["spread"], 4)}
        for m, t in result.modes.items()
    ]  # fmt: skip


def run(args: argparse.Namespace) -> dict:
    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    if device.type == "cpu" and not args.tiny:
        raise BenchError("no CUDA: full sizes under the Triton interpreter take hours; use --tiny")
    if bool(args.starters) == bool(args.workspace):
        raise BenchError("give exactly one of --starters or --workspace DIR")
    if args.backend == "cuda" and not (args.starters and device.type == "cuda"):
        raise BenchError("--backend cuda plugs in the CUDA starters: it needs --starters and a GPU")
    ws = starter_workspace(args.backend) if args.starters else Path(args.workspace)
    families = [f.strip() for f in args.models.split(",") if f.strip()]
    unknown = [f for f in families if f not in GPU]
    if unknown:
        raise BenchError(f"--models {','.join(unknown)}: use some of {', '.join(GPU)}")
    dtype = torch.bfloat16 if device.type == "cuda" and not args.tiny else torch.float32
    import triton

    out = {"gpu": torch.cuda.get_device_name() if device.type == "cuda" else "cpu",
           "torch": torch.__version__, "triton": triton.__version__, "commit": args.commit,
           "date": dt.date.today().isoformat(), "mode": args.mode, "kernels_from":
           f"starters ({args.backend})" if args.starters else str(ws), "rows": [], "models": {}, "skipped": {}}  # fmt: skip
    rounds = args.rounds or (GPU_ROUNDS if device.type == "cuda" else 1)
    for family in families:
        left = args.budget_s - (time.perf_counter() - T0)
        if device.type == "cuda" and left < MODEL_RESERVE_S:
            out["skipped"][family] = f"budget: {left:.0f} s left of {args.budget_s:.0f}"
            continue
        model, inputs, tokens = build(family, args.tiny, device, dtype)
        try:
            kernels, _, _ = collect_kernels(ws, skip_slower=device.type == "cuda")
            t0 = time.perf_counter()
            result = verify_model(model, inputs, kernels, name=family, mode=args.mode,
                                  with_compile=not args.no_compile, cuda_graphs=args.cuda_graphs,
                                  rounds=rounds)  # fmt: skip
            conclude(result, kernels, ws)
        except VerifyError as exc:
            out["skipped"][family] = str(exc)
            continue
        finally:
            del model
        out["rows"] += rows_of(family, tokens, result)
        out["models"][family] = result.to_json() | {"seconds": round(time.perf_counter() - t0, 1)}
        write(out, args)
    out["seconds"] = round(time.perf_counter() - T0, 1)
    write(out, args)
    return out


def write(out: dict, args: argparse.Namespace) -> None:
    d = Path(args.out_dir)
    d.mkdir(parents=True, exist_ok=True)
    (d / f"{args.prefix}-models-latest.json").write_text(json.dumps(out, indent=1) + "\n")
    (d / f"{args.prefix}-models-{out['date']}.md").write_text(markdown(out))


def markdown(out: dict) -> str:
    lines = [f"# Whole models, every mode ({out['gpu']})", "",
             f"torch {out['torch']}, triton {out['triton']}, commit {out['commit']}, "
             f"{out['date']}; kernels: {out['kernels_from']}; selection in {out['mode']} mode.",
             "ms: median over interleaved rounds; spread: half the p20-p80 over rounds.", ""]  # fmt: skip
    for name, res in out["models"].items():
        rows = [r for r in out["rows"] if r["model"] == name]
        eager = next((r["ms"] for r in rows if r["mode"] == "eager"), None)
        comp = next((r["ms"] for r in rows if r["mode"] == "compile"), None)
        lines += [f"## {name} ({rows[0]['tokens']} tokens, best: {res['best_mode']})", "",
                  "| mode | ms | spread | vs eager | vs compile | vs the same run without our "
                  "kernels | predicted ms | kernels |", "|---|---|---|---|---|---|---|---|"]  # fmt: skip
        ms = {r["mode"]: r["ms"] for r in rows}
        for r in rows:
            ve = f"{eager / r['ms']:.2f}x" if eager else "—"
            vc = f"{comp / r['ms']:.2f}x" if comp else "—"
            base = ms.get(BASE.get(r["mode"], ""))
            vb = f"{base / r['ms']:.2f}x" if base else "—"
            pm = "—" if r["predicted_ms"] is None else f"{r['predicted_ms']:.3f}"
            lines.append(f"| {r['mode']} | {r['ms']:.3f} | ±{r['spread']:.1%} | {ve} | {vc} | "
                         f"{vb} | {pm} | {', '.join(r['kernels']) or '—'} |")  # fmt: skip
        lines.append("")
        sel = res.get("selection")
        if sel:
            for t in sel["candidates"]:
                e = sel["effects"].get(t, {})
                k = (sel.get("kept_effects") or {}).get(t)
                why = "kept" if t in sel["kept"] else f"dropped: {sel['dropped'].get(t, '')}"
                why += f" ({k['ratio']:.2f}x with the kept set)" if k else ""
                lines.append(f"- {t}: first pass, every candidate in: the forward "
                             f"{e.get('ratio', 0):.2f}x as fast with it as without; {why}")  # fmt: skip
        label = "helps" if sel else "plugged in (no selection)"
        for m, kept in res.get("kept", {}).items():
            lines.append(f"- {label} in {m} mode: {', '.join(kept) or 'none'}")
        for p in res.get("predictions", []):
            lines.append(f"- prediction ({p['source']}): {p['predicted_ms']:.3f} ms vs "
                         f"{p['measured_ms']:.3f} ms measured ({p['miss']:+.0%}) {p['message']}")  # fmt: skip
        if res.get("graph_breaks"):
            lines.append(f"- graph breaks: {res['graph_breaks']}")
        for n in res.get("notes", []):
            lines.append(f"- note: {n}")
        lines.append(f"- {res['seconds']} s")
        lines.append("")
    for name, why in out["skipped"].items():
        lines.append(f"- {name}: not run: {why}")
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--starters", action="store_true", help="plug in kernels/*.py")
    ap.add_argument("--workspace", help="a run directory with optimized kernels")
    ap.add_argument("--backend", choices=("triton", "cuda"), default="triton",
                    help="with --starters: cuda plugs in kernels/cuda/*.py where a type has one")  # fmt: skip
    ap.add_argument("--models", default=",".join(GPU), help="comma list of " + ", ".join(GPU))
    ap.add_argument("--mode", choices=("eager", "compile"), default="eager")
    ap.add_argument("--tiny", action="store_true", help="tiny configs (CPU check)")
    ap.add_argument("--no-compile", action="store_true", help="skip the torch.compile modes")
    ap.add_argument("--cuda-graphs", action=argparse.BooleanOptionalAction, default=None)
    ap.add_argument("--rounds", type=int, default=0, help="interleaved rounds (0: 3 GPU, 1 CPU)")
    ap.add_argument("--budget-s", type=float, default=220.0)
    ap.add_argument("--out-dir", default=str(ROOT / "benchmarks" / "results"))
    ap.add_argument("--prefix", default="h200")
    args = runner.add_arguments(ap).parse_args(argv)
    args.commit = args.commit or runner.tree_commit()
    if args.cuda_graphs is None:
        args.cuda_graphs = torch.cuda.is_available()
    if args.mode == "compile" and args.no_compile:
        print("error: --mode compile needs the compile modes: drop --no-compile", file=sys.stderr)
        return 2
    try:
        out = run(args)
    except BenchError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    # The selection mode changes which kernels stay: a run in compile mode answers its own
    # question, so it does not replace the eager-mode run in latest.md.
    question = "models" if out["mode"] == "eager" else f"models ({out['mode']} selection)"
    runner.record(question, out["rows"], markdown(out), commit=args.commit, results=args.results,
                  extra={"skipped": out["skipped"], "mode": out["mode"]})  # fmt: skip
    print(json.dumps({"rows": out["rows"], "skipped": out["skipped"],
                      "seconds": out["seconds"]}, indent=1))  # fmt: skip
    return 0


if __name__ == "__main__":
    sys.exit(main())
