"""How far right and wrong kernels move a half-precision model from its float32 answer.

The measurements behind `autokernel verify`'s half-precision rule (docs/verify-tolerance.md):
patched passes when err(patched) <= max(REFERENCE_FACTOR x err(eager), eps(dtype)), with
err(a) = ||a - exact|| / ||exact|| and `exact` the model's float32 forward, and the old rule
(max|patched - eager| / max(1, max|eager|) <= harness atol x 5) passes too. This script shows
where right kernels land on that scale and how far wrong ones go, so REFERENCE_FACTOR can be
checked (or chosen again) by anyone.

It builds tiny random Hugging Face models (hidden 64, 4 heads, 2 KV heads, vocab 256, 2 x 16
tokens, SDPA), plugs in every shipped starter (kernels/*.py) through verify's own path (Patch,
the one matcher, reference_outputs, compare), optionally with a planted fault, and writes one
JSON line per floating output and a Markdown summary: per (family, init, layers, fault) the
min-max of err(patched) / err(eager) and how many outputs each rule fails. Faults are planted
in a starter's kernel_fn (a wrapper appended to a copy of the file) or by having the matcher's
probe accept a module it would refuse (Gemma's MLP, which is GeGLU, claimed as SwiGLU; Gemma's
RMSNorm, which scales by 1 + w, claimed as a plain RMSNorm).

On a machine without CUDA the starters run in Triton's interpreter (switched on here): a few
seconds per model and fault. Run from outside the repository root (its top-level kernels/
would shadow Hugging Face's `kernels`; the script shields the name in any case):

    cd /tmp && PYTHONPATH=/path/to/autokernel python -m benchmarks.verify_tolerance \\
        --families llama,gemma --faults none,rms_no_offset,silu_for_gelu --seeds 0-1 \\
        --inits default,0.2 --out-jsonl /tmp/vtol.jsonl --out-md /tmp/vtol.md
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import sys
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch

from benchmarks import runner

DTYPES = {"bf16": torch.bfloat16, "fp16": torch.float16}
TOKENS = (2, 16)  # batch, sequence
VOCAB = 256
WIDTH = {"hidden_size": 64, "intermediate_size": 128, "num_attention_heads": 4,
         "num_key_value_heads": 2, "vocab_size": VOCAB, "max_position_embeddings": 64}  # fmt: skip
# family -> (config class, model class, config kwargs, the kwarg holding the layer count)
FAMILIES: dict[str, tuple[str, str, dict, str]] = {
    "llama": ("LlamaConfig", "LlamaForCausalLM", WIDTH, "num_hidden_layers"),
    "qwen2": ("Qwen2Config", "Qwen2ForCausalLM", WIDTH, "num_hidden_layers"),
    "mistral": ("MistralConfig", "MistralForCausalLM", WIDTH, "num_hidden_layers"),
    "phi3": ("Phi3Config", "Phi3ForCausalLM", WIDTH | {"pad_token_id": 0}, "num_hidden_layers"),
    "gemma": ("GemmaConfig", "GemmaForCausalLM",
              WIDTH | {"head_dim": 16, "hidden_activation": "gelu_pytorch_tanh"},
              "num_hidden_layers"),
    "gpt2": ("GPT2Config", "GPT2LMHeadModel",
             {"n_embd": 64, "n_head": 4, "n_positions": 64, "vocab_size": VOCAB}, "n_layer"),
    "bert": ("BertConfig", "BertModel",
             {"hidden_size": 64, "num_attention_heads": 4, "intermediate_size": 128,
              "max_position_embeddings": 64, "vocab_size": VOCAB}, "num_hidden_layers"),
}  # fmt: skip

_WRAP = "\n_planted_original = kernel_fn\n\n\n"
_RMS_EPS = ("def kernel_fn(x, weight, eps=1e-6):\n"
            "    return _planted_original(x, weight, eps * 10)\n")  # fmt: skip
_LN_EPS = ("def kernel_fn(x, weight, bias, eps=1e-5):\n"
           "    return _planted_original(x, weight, bias, eps * 10)\n")  # fmt: skip
_SCALE = """def kernel_fn(Q, K, V, causal=True, sm_scale=None, attn_mask=None):
    s = Q.shape[-1] ** -0.5 if sm_scale is None else sm_scale
    return _planted_original(Q, K, V, causal, s * FACTOR, attn_mask)
"""
# The model's cos/sin tables replaced by ones computed with another base (the control computes
# them with the models' own 1e4: the wrapper alone must not move anything).
_ROTARY = """def kernel_fn(x, cos, sin):
    s, d = cos.shape[-2], cos.shape[-1]
    inv = 1.0 / (BASE ** (torch.arange(0, d, 2, dtype=torch.float64) / d))
    f = torch.outer(torch.arange(s, dtype=torch.float64), inv)
    e = torch.cat((f, f), -1)
    c = e.cos().to(cos.dtype).expand(cos.shape).contiguous()
    return _planted_original(x, c, e.sin().to(sin.dtype).expand(sin.shape).contiguous())
"""


@dataclass(frozen=True)
class Fault:
    """A wrong kernel: wrappers appended to starters (type -> source), or a probe forced."""

    wrappers: dict[str, str] = field(default_factory=dict)
    # the `what` of autokernel.model.matcher.probe to accept whatever the module computes
    forced_probe: str | None = None


FAULTS: dict[str, Fault] = {
    "none": Fault(),
    "rms_eps10": Fault({"rmsnorm": _RMS_EPS}),
    "attn_scale1.05": Fault({"flash_attention": _SCALE.replace("FACTOR", "1.05")}),
    "attn_scale1.02": Fault({"flash_attention": _SCALE.replace("FACTOR", "1.02")}),
    "rot_base5e5": Fault({"rotary_embedding": _ROTARY.replace("BASE", "500000.0")}),
    "rot_base1e4_control": Fault({"rotary_embedding": _ROTARY.replace("BASE", "10000.0")}),
    "ln_eps10": Fault({"layernorm": _LN_EPS}),
    "silu_for_gelu": Fault(forced_probe="a SwiGLU MLP"),  # autokernel/specs/mlp_model.py
    "rms_no_offset": Fault(forced_probe="rmsnorm"),  # autokernel/specs/rowwise_model.py
}


def build(family: str, seed: int, init: float | None, layers: int, dtype: torch.dtype) -> tuple:
    """(model, inputs): random weights at the config's init (std 0.02) or at `init`. With an
    init of its own, Gemma's norm weights are drawn as 0.3 x randn (a fresh Gemma's are all
    zero, so its 1 + w would be 1 everywhere, unlike a trained model's)."""
    import transformers

    config_name, model_name, kwargs, layer_key = FAMILIES[family]
    kwargs = kwargs | {layer_key: layers}
    if init is not None:
        kwargs["initializer_range"] = init
    config = getattr(transformers, config_name)(**kwargs, use_cache=False)
    config._attn_implementation = "sdpa"
    torch.manual_seed(seed)
    model = getattr(transformers, model_name)(config).to(dtype).eval()
    if family == "gemma" and init is not None:
        g = torch.Generator().manual_seed(seed)
        with torch.no_grad():
            for name, p in model.named_parameters():
                if "norm" in name:
                    p.copy_(0.3 * torch.randn(p.shape, generator=g))
    ids = torch.randint(0, VOCAB, TOKENS, generator=torch.Generator().manual_seed(seed + 100))
    return model, [ids]


def load_starters(fault: Fault, folder: Path) -> list:
    """Every shipped Triton starter, loaded as verify loads kernels; a faulted type from a copy
    with the wrapper appended."""
    from autokernel.model.kernel_ops import load_kernel
    from autokernel.shipped import STARTERS

    kernels = []
    for path in sorted(STARTERS.glob("[a-z]*.py")):
        if path.stem in fault.wrappers:
            copy = folder / path.name
            copy.write_text(path.read_text() + _WRAP + fault.wrappers[path.stem])
            path = copy
        kernels.append(load_kernel(path, path.stem))
    return kernels


@contextlib.contextmanager
def probe_forced(what: str | None) -> Iterator[None]:
    """The matcher accepts every module probed for `what`, whatever it computes (the probe's
    cache is neither read nor written for those), so the starter replaces it."""
    if what is None:
        yield
        return
    from autokernel.model import matcher

    real = matcher.probe

    def forced(owner: object, run: Any, probed: str) -> str:
        return "" if probed == what else real(owner, run, probed)

    matcher.probe = forced
    try:
        yield
    finally:
        matcher.probe = real


def flat(obj: Any, name: str = "output") -> list[tuple[str, torch.Tensor]]:
    """The tensors in a model's outputs, named as verify names them."""
    if isinstance(obj, torch.Tensor):
        return [(name, obj)]
    if isinstance(obj, dict):
        return [t for k, v in obj.items() for t in flat(v, f"{name}.{k}")]
    if isinstance(obj, (list, tuple)):
        return [t for i, v in enumerate(obj) for t in flat(v, f"{name}[{i}]")]
    return []


def measure(model: torch.nn.Module, inputs: list, kernels: list, dtype: torch.dtype,
            forced: str | None) -> tuple[list[dict], dict[str, int]]:  # fmt: skip
    """Eager, float32 and patched forwards as verify_model runs them; one row per output."""
    from autokernel.model.patching import Patch
    from autokernel.model.verify.outputs import ACCUMULATION_FACTOR, compare, normwise
    from autokernel.model.verify.upcast import reference_outputs

    patch = Patch(kernels, "dtype")
    try:
        with torch.no_grad():
            eager = model(*inputs)
            exact, why = reference_outputs(model, inputs, dtype)
            if exact is None:
                raise RuntimeError(f"no float32 reference: {why}")
            with probe_forced(forced), patch.applied(model, traced=False):
                out = model(*inputs)
        calls = {k: c["kernel"] for k, c in patch.counts().items() if c["kernel"]}
    finally:
        patch.close()
    new = compare(eager, out, dtype, ACCUMULATION_FACTOR, exact)
    old = compare(eager, out, dtype, ACCUMULATION_FACTOR)
    rows = []
    for (name, e), (_, o), (_, x), n, d in zip(
        flat(eager), flat(out), flat(exact), new, old, strict=True
    ):
        if not e.is_floating_point():
            continue
        err_eager, err_patched = normwise(x, e), normwise(x, o)
        rows.append({
            "output": name, "err_eager": err_eager, "err_patched": err_patched,
            "ratio": err_patched / err_eager if err_eager else float("inf"),
            "old_error": d.error, "old_tolerance": d.tolerance, "old_pass": d.ok,
            "new_rule": n.rule, "new_margin": n.margin, "new_pass": n.ok,
        })  # fmt: skip
    return rows, calls


def seeds_of(text: str) -> list[int]:
    """'0-3' or '0,2,5' (or both: '0-1,7')."""
    out: list[int] = []
    for part in text.split(","):
        lo, _, hi = part.partition("-")
        out.extend(range(int(lo), int(hi or lo) + 1))
    return out


def inits_of(text: str) -> list[float | None]:
    return [None if i == "default" else float(i) for i in text.split(",")]


def _fails(rows: list[dict], key: str) -> str:
    n = sum(not r[key] for r in rows)
    return "fails" if n == len(rows) else "passes" if n == 0 else f"fails {n}/{len(rows)}"


def summary(rows: list[dict], dtype: str) -> str:
    """Markdown: per (family, init, layers, fault), the ratio's range and each rule's verdict."""
    groups: dict[tuple, list[dict]] = {}
    for r in rows:
        groups.setdefault((r["family"], r["init"], r["layers"], r["fault"]), []).append(r)
    lines = [
        f"err(patched) / err(eager) against the float32 forward, {dtype}, every starter plugged "
        "in; new rule: reference rule and old rule; old rule: max error (worst) of its tolerance",
        "",
        "| family | init | layers | fault | seeds | ratio | new rule | old rule | old error |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for (family, init, layers, fault), rs in groups.items():
        ratios = [r["ratio"] for r in rs]
        seeds = sorted({r["seed"] for r in rs})
        worst = max(rs, key=lambda r: r["old_error"] / r["old_tolerance"])
        lines.append(
            f"| {family} | {init or 'default'} | {layers} | {fault} | "
            f"{','.join(map(str, seeds))} | {min(ratios):.2f} - {max(ratios):.2f} | "
            f"{_fails(rs, 'new_pass')} | {_fails(rs, 'old_pass')} | "
            f"{worst['old_error']:.3g} of {worst['old_tolerance']:.3g} |"
        )
    return "\n".join(lines) + "\n"


def parse(argv: list[str]) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--families", default=",".join(FAMILIES), help="comma-separated: "
                   + ", ".join(FAMILIES))  # fmt: skip
    p.add_argument("--faults", default="none", help="comma-separated: " + ", ".join(FAULTS))
    p.add_argument("--seeds", default="0-3", help="'0-3' or '0,1' (weights and token ids)")
    p.add_argument("--inits", default="default,0.2",
                   help="weight std, comma-separated; 'default': the config's (0.02)")  # fmt: skip
    p.add_argument("--layers", type=int, default=2, help="hidden layers of every model")
    p.add_argument("--dtype", choices=sorted(DTYPES), default="bf16")
    p.add_argument("--out-jsonl", type=Path, help="append one JSON line per output here")
    p.add_argument("--out-md", type=Path, help="write the Markdown summary here")
    args = runner.add_arguments(p).parse_args(argv)
    for flag, names, known in (("--families", args.families, FAMILIES),
                               ("--faults", args.faults, FAULTS)):  # fmt: skip
        unknown = [n for n in names.split(",") if n not in known]
        if unknown:
            p.error(f"{flag}: unknown {', '.join(unknown)}; use some of {', '.join(known)}")
    return args


def main(argv: list[str]) -> int:
    args = parse(argv)
    if not torch.cuda.is_available():
        os.environ.setdefault("TRITON_INTERPRET", "1")  # before anything imports Triton
    from autokernel.model.name_shield import shield_kernels_name

    shield_kernels_name()  # before transformers looks for Hugging Face's `kernels`
    dtype = DTYPES[args.dtype]
    rows: list[dict] = []
    sink = args.out_jsonl.open("a") if args.out_jsonl else None
    try:
        with tempfile.TemporaryDirectory() as tmp:
            for family in args.families.split(","):
                for init in inits_of(args.inits):
                    for seed in seeds_of(args.seeds):
                        model, inputs = build(family, seed, init, args.layers, dtype)
                        for name in args.faults.split(","):
                            fault = FAULTS[name]
                            folder = Path(tmp) / f"{family}-{init}-{seed}-{name}"
                            folder.mkdir()
                            kernels = load_starters(fault, folder)
                            found, calls = measure(model, inputs, kernels, dtype,
                                                   fault.forced_probe)  # fmt: skip
                            for r in found:
                                row = {"family": family, "dtype": args.dtype, "init": init,
                                       "layers": args.layers, "seed": seed, "fault": name,
                                       **r, "calls": calls}  # fmt: skip
                                rows.append(row)
                                line = json.dumps(row)
                                print(line, flush=True)
                                if sink:
                                    sink.write(line + "\n")
                                    sink.flush()
    finally:
        if sink:
            sink.close()
    table = summary(rows, args.dtype)
    if args.out_md:
        args.out_md.write_text(table)
    print("\n" + table)
    # On the CPU only where --results names a folder (runner.add_arguments): interpreter figures
    # never land beside the GPU history by accident.
    runner.record("verify_tolerance", rows, table, commit=args.commit or runner.tree_commit(),
                  results=args.results)  # fmt: skip
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
