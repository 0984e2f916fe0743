"""program.md, the playbook the LLM reads every experiment, stays true.

It must fit in a system prompt, show the reply markers the parser looks for, cover the nine
kernel types and the six tiers, state the guards' lists exactly as guards.py enforces them, and
name only Triton/torch APIs that exist: every `tl.*`, `triton.*` and `torch.*` name in its code
resolves in the installed packages, and every keyword argument it passes is one the callee takes.
"""

from __future__ import annotations

import dataclasses
import importlib
import inspect
import re
from pathlib import Path

import pytest
import torch
import triton
import triton.language as tl
from triton.backends.nvidia.compiler import CUDAOptions

from autokernel import reference
from autokernel.harness import guards

PROGRAM = Path(__file__).parents[1] / "program.md"
# Sent verbatim as the system prompt every experiment: with the CUDA section it still leaves
# more than half of the 60k-character prompt (agents/prompt.py) to the request.
MAX_CHARS = 29_000
MAX_LINES = 420

# The parser reads the first line's prefix and these three lines exactly.
HYPOTHESIS = "HYPOTHESIS:"
SEARCH, DIVIDER, REPLACE = "<<<<<<< SEARCH", "=======", ">>>>>>> REPLACE"
TIER_TOPICS = {
    1: "block sizes",
    2: "memory access",
    3: "compute",
    4: "advanced",
    5: "architecture",
    6: "kernel-specific",
}

# The GPU runs Triton 3.6, this machine 3.7. Names that exist in 3.6 but not in 3.7 would need
# listing here (with the TRITON_FACTS.md line that shows it); there are none.
ONLY_IN_36: frozenset[str] = frozenset()
# New in 3.7 (TRITON_FACTS.md, "3.7 vs 3.6"): the playbook may name them only to warn.
NEW_IN_37 = frozenset({"tl.squeeze", "tl.unsqueeze", "tl.to_tensor"})
# Accepted string values (TRITON_FACTS.md section 3; semantic.py raises ValueError otherwise).
KWARG_VALUES = {
    "eviction_policy": {"evict_first", "evict_last"},
    "cache_modifier": {".ca", ".cg", ".cv", ".wb", ".cs", ".wt"},
    "input_precision": set(
        next(f.default for f in dataclasses.fields(CUDAOptions)
             if f.name == "allowed_dot_input_precisions")
    ),
}  # fmt: skip
LAUNCH_OPTIONS = frozenset(f.name for f in dataclasses.fields(CUDAOptions))

ROOTS = {"tl": tl, "triton": triton, "torch": torch}
DOTTED = re.compile(r"(?<![\w.])(?:tl|triton|torch)(?:\.[A-Za-z_]\w*)+")
FROM_IMPORT = re.compile(r"^\s*from\s+((?:triton|torch)[\w.]*)\s+import\s+([\w, ]+)", re.M)
KWARG = re.compile(r"^\s*([A-Za-z_]\w*)\s*=(?!=)")


def _text() -> str:
    return PROGRAM.read_text()


def _fenced(md: str) -> list[tuple[str, str]]:
    return re.findall(r"^```(\w*)\n(.*?)^```", md, flags=re.M | re.S)


def _inline(md: str) -> list[str]:
    prose = re.sub(r"^```.*?^```", "", md, flags=re.M | re.S)
    return re.findall(r"`([^`]+)`", prose)


def _code() -> list[str]:
    md = _text()
    return [body for _, body in _fenced(md)] + _inline(md)


def _resolve(name: str) -> object:
    """The object a dotted name stands for; importing submodules on the way, as `import` would."""
    root, *parts = name.split(".")
    obj: object = ROOTS[root]
    for part in parts:
        if hasattr(obj, part):
            obj = getattr(obj, part)
        elif inspect.ismodule(obj):
            try:
                obj = importlib.import_module(f"{obj.__name__}.{part}")
            except ModuleNotFoundError:
                raise AttributeError(f"{name}: module {obj.__name__} has no {part!r}") from None
        else:
            raise AttributeError(f"{name}: {type(obj).__name__} has no attribute {part!r}")
    return obj


def _names() -> list[str]:
    found = set()
    for code in _code():
        found.update(DOTTED.findall(code))
        for module, names in FROM_IMPORT.findall(code):
            found.update(f"{module}.{n.strip()}" for n in names.split(",") if n.strip())
    return sorted(found)


def _split_args(code: str, start: int) -> tuple[list[str], int]:
    """Top-level arguments of the call whose '(' is at code[start], and the index after ')'."""
    depth, args, cur, i, quote = 0, [], "", start, None
    while i < len(code):
        c = code[i]
        if quote:
            quote = None if c == quote else quote
        elif c in "\"'":
            quote = c
        elif c in "([{":
            depth += 1
            if depth == 1:
                i += 1
                continue
        elif c in ")]}":
            depth -= 1
            if depth == 0:
                args.append(cur)
                return [a.strip() for a in args if a.strip()], i + 1
        elif c == "," and depth == 1:
            args.append(cur)
            cur = ""
            i += 1
            continue
        cur += c
        i += 1
    return [], i  # unbalanced: a call cut off in prose; nothing to check


def _calls() -> list[tuple[str, list[str]]]:
    """(dotted name, argument texts) for every tl/triton/torch call written in the playbook."""
    calls = []
    for code in _code():
        for m in DOTTED.finditer(code):
            if code[m.end() : m.end() + 1] == "(":
                args, _ = _split_args(code, m.end())
                calls.append((m.group(), args))
    return calls


def _launches() -> list[list[str]]:
    """Argument texts of every `kernel[grid](...)` launch written in the playbook."""
    launches = []
    for code in _code():
        for m in re.finditer(r"\w\[[^\]\n]*\]\(", code):
            launches.append(_split_args(code, m.end() - 1)[0])
    return launches


def _signature(obj: object) -> inspect.Signature | None:
    fn = getattr(obj, "fn", obj) if isinstance(obj, triton.runtime.JITFunction) else obj
    try:
        return inspect.signature(fn)
    except (TypeError, ValueError):  # C builtins such as torch.empty expose none
        return None


def _kwargs(args: list[str]) -> dict[str, str]:
    out = {}
    for a in args:
        m = KWARG.match(a)
        if m:
            out[m.group(1)] = a[m.end() :].strip()
    return out


def _bullet(md: str, label: str) -> str:
    start = md.index(f"- {label}:")
    end = re.compile(r"\n\s*- |\n\n").search(md, start + 2)
    return md[start : end.start() if end else len(md)]


# --- shape and coverage ---------------------------------------------------------------------


def test_program_exists_and_fits_a_system_prompt():
    md = _text()
    assert len(md) < MAX_CHARS, f"program.md is {len(md)} characters (limit {MAX_CHARS})"
    assert len(md.splitlines()) <= MAX_LINES


def test_reply_format_markers_are_the_parsers():
    md = _text()
    assert f"`{HYPOTHESIS} `" in md or f"{HYPOTHESIS} <" in md
    lines = md.splitlines()
    for marker in (SEARCH, DIVIDER, REPLACE):
        assert marker in lines, f"{marker!r} must appear on a line of its own"
    i = lines.index(SEARCH)
    assert lines.index(DIVIDER, i) < lines.index(REPLACE, i), "markers out of order"


def test_the_reply_format_it_shows_is_what_the_parser_accepts():
    replies = pytest.importorskip("autokernel.agents.replies")
    example = next(body for lang, body in _fenced(_text()) if SEARCH in body).splitlines()
    search, divider, replace = example[0], example[2], example[-1]
    current = (Path(__file__).parents[1] / "kernels" / "softmax.py").read_text()
    old = 'BACKEND = "triton"'
    reply = "\n".join(
        [f"{HYPOTHESIS} say why", search, old, divider, old + "  # edited", replace]
    )  # fmt: skip
    source, hypothesis = replies.parse_reply(reply, current)
    assert hypothesis == "say why" and old + "  # edited" in source
    whole = f"{HYPOTHESIS} whole file\n```python\n{current}# edited\n```\n"
    assert replies.parse_reply(whole, current)[0].endswith("# edited\n")


def test_names_all_nine_kernel_types():
    md = _text()
    tier6 = md[md.index("### Tier 6") :]
    missing = [t for t in reference.KERNEL_TYPES if f"**{t}**" not in tier6]
    assert not missing, f"Tier 6 has no entry for {missing}"


def test_names_all_six_tiers_in_order():
    headings = re.findall(r"^### Tier (\d) — (.+)$", _text(), flags=re.M)
    assert [int(n) for n, _ in headings] == list(TIER_TOPICS)
    for n, title in headings:
        assert TIER_TOPICS[int(n)] in title.lower(), f"Tier {n} is titled {title!r}"


# --- the guards, stated exactly ---------------------------------------------------------------


def test_allowed_imports_match_the_guard():
    spans = re.findall(r"`([\w.]+)`", _bullet(_text(), "imports"))
    assert {s.split(".")[0] for s in spans} == guards.ALLOWED_IMPORTS


def test_allowed_torch_names_match_the_guard():
    md = _text()
    listed = set()
    for label in ("allocation", "dtypes and types", "device queries"):
        listed.update(re.findall(r"`torch\.([\w.]+)`", _bullet(md, label)))
    assert listed == set(guards.ALLOWED_TORCH)


def test_forbidden_calls_and_attributes_match_the_guard():
    calls, _, attrs = _bullet(_text(), "Forbidden calls").partition(".")
    assert set(re.findall(r"`(\w+)`", calls)) == guards.FORBIDDEN_CALLS
    named = set(re.findall(r"`(\w+)`", attrs))
    assert named and named <= guards.ESCAPE_ATTRS | {"_"}


def test_every_torch_name_it_shows_is_allowed_in_kernel_py():
    def allowed(sub: str) -> bool:
        return sub in guards.ALLOWED_TORCH or any(
            sub.startswith(a + ".") for a in guards.ALLOWED_TORCH
        )

    shown = [n for n in _names() if n.startswith("torch.")]
    assert shown
    bad = [n for n in shown if not allowed(n.removeprefix("torch."))]
    assert not bad, f"program.md shows torch names the guard rejects: {bad}"


def test_python_examples_parse_and_pass_the_static_guard():
    """Each example is a fragment of a kernel.py: the names its surrounding file would define
    (the imports, the sizes, the tensors) are not the fragment's to bind."""
    blocks = [body for lang, body in _fenced(_text()) if lang == "python"]
    assert blocks
    for body in blocks:
        findings = guards.check_source(body)
        assert [f for f in findings if "is not defined in kernel.py" not in f.what] == [], body


# --- every API it names exists ----------------------------------------------------------------


@pytest.mark.parametrize("name", _names() if PROGRAM.exists() else [])
def test_named_api_exists(name):
    if name in ONLY_IN_36:
        return
    _resolve(name)


def test_names_new_in_37_only_appear_as_warnings():
    for line in _text().splitlines():
        for name in NEW_IN_37:
            if re.search(rf"`{re.escape(name)}`", line):
                assert "3.7" in line, f"{name} is not in Triton 3.6 (the GPU's): {line!r}"


def test_no_prefetch_intrinsic_is_named():
    assert "tl.prefetch" not in _text()  # does not exist in 3.6 or 3.7 (TRITON_FACTS.md §3)


def test_call_keywords_and_arity_match_signatures():
    checked = 0
    for name, args in _calls():
        if name in ONLY_IN_36:
            continue
        sig = _signature(_resolve(name))
        kwargs = _kwargs(args)
        for key, value in kwargs.items():
            if key in KWARG_VALUES:
                assert value.strip("\"'") in KWARG_VALUES[key], f"{name}({key}={value})"
        if sig is None:
            continue
        if any(a == "..." for a in args):  # elided arguments: check the keywords only
            params = sig.parameters
            takes_any = any(p.kind is p.VAR_KEYWORD for p in params.values())
            bad = [k for k in kwargs if k not in params and not takes_any]
            assert not bad, f"{name} takes no keyword {bad}"
        else:
            positional = [a for a in args if not KWARG.match(a)]
            try:
                sig.bind(*positional, **kwargs)
            except TypeError as exc:
                pytest.fail(f"{name}({', '.join(args)}) does not fit {name}{sig}: {exc}")
        checked += 1
    assert checked >= 10


def test_launch_options_exist():
    launches = _launches()
    assert launches
    for args in launches:
        for key, value in _kwargs(args).items():
            if key.islower():  # UPPER_CASE keywords are the kernel's own constexprs
                assert key in LAUNCH_OPTIONS, f"launch option {key}={value} does not exist"


def test_bare_keywords_belong_to_something_named():
    """`name=` or `name=value` written on its own must be a launch option or a parameter of one
    of the callables the playbook names."""
    known = set(LAUNCH_OPTIONS)
    for name in _names():
        if name in ONLY_IN_36:
            continue
        sig = _signature(_resolve(name))
        if sig is not None:
            known.update(sig.parameters)
    spans = _inline(_text())
    bare = dict(m.groups() for s in spans if (m := re.fullmatch(r"([a-z_]\w*)=([^\s,()]*)", s)))
    assert bare
    for key, value in bare.items():
        if key in KWARG_VALUES and value:
            assert value.strip("\"'") in KWARG_VALUES[key], f"{key}={value}"
    unknown = sorted(set(bare) - known)
    assert not unknown, f"keywords no named API takes: {unknown}"


def test_checks_catch_a_planted_api(monkeypatch):
    """The resolver and the signature check fail on names and keywords that do not exist."""
    with pytest.raises(AttributeError):
        _resolve("tl.prefetch")
    with pytest.raises(AttributeError):
        _resolve("triton.tools.tensor_descriptor.TensorDescriptor.from_array")
    sig = _signature(_resolve("tl.load"))
    with pytest.raises(TypeError):
        sig.bind("ptr", evict="first")
    assert "num_warps" in LAUNCH_OPTIONS and "num_threads" not in LAUNCH_OPTIONS
