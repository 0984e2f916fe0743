"""Load only what was judged: verify and the API import a kernel file into the user's own
process, with the user's whole environment, so it must be a file the harness passed.

A file is judged when the sha256 of its exact bytes is one that a PASS verdict of the same
workspace recorded (.autokernel/verdicts/N.json, written by the run), or it is one of the
shipped starters. The static guard runs again on it either way: a verdict on disk is only as
trustworthy as the disk. A file that builds native code (load_inline) is refused even so: the
guard cannot read C++, and the sandbox that contained it is not around your process. Without a
GPU the kernels run under Triton's interpreter, whose loads and stores take raw host addresses:
there only the starters' and the built-in tuner's kernels load (both are our own code), not an
LLM's, however judged. AUTOKERNEL_TRUST_UNJUDGED=1 loads anything, for kernels you wrote or
read and vouch for.
"""

from __future__ import annotations

import ast
import hashlib
import json
import os
from collections.abc import Collection
from pathlib import Path

from autokernel import syntax
from autokernel.harness.static_check import UnjudgeableSource, check_source
from autokernel.run import layout
from autokernel.run.results import ResultsLog
from autokernel.shipped import STARTERS

TRUST_ENV = "AUTOKERNEL_TRUST_UNJUDGED"
NATIVE_BUILDERS = frozenset({"cpp_extension", "load_inline"})
# Proposers whose kernels are our own code: the shipped starter, and the built-in tuner, which
# only edits a starter's CONFIG literal. An LLM's or a command's kernels are untrusted code.
OUR_AGENTS = ("starter", "tuner")


class UnjudgedKernel(Exception):
    """The file is not one the harness passed, or it fails the static guard now."""


def sha256_of(path: Path) -> str:
    """The hex sha256 of the file's bytes; "" when it cannot be read (the caller reports that)."""
    try:
        return hashlib.sha256(Path(path).read_bytes()).hexdigest()
    except OSError:
        return ""


def passed_hashes(workspace: Path, agents: Collection[str] | None = None) -> set[str]:
    """Hashes of the kernel files that PASS verdicts in the workspace recorded; with `agents`,
    only of experiments whose results.tsv row names one of them (no worker can write that
    file: the workspace is not mounted in the sandbox)."""
    allowed = None if agents is None else _experiments_by(workspace, agents)
    found = set()
    for verdict in (Path(workspace) / layout.VERDICTS).glob("*.json"):
        if allowed is not None and verdict.stem not in allowed:
            continue
        try:
            data = json.loads(verdict.read_text())
        except (OSError, ValueError):
            continue  # a damaged verdict vouches for nothing
        if isinstance(data, dict) and data.get("status") == "PASS" and data.get("sha256"):
            found.add(str(data["sha256"]))
    return found


def _experiments_by(workspace: Path, agents: Collection[str]) -> set[str]:
    rows = ResultsLog(Path(workspace) / layout.RESULTS).read()
    return {str(r.get("experiment")) for r in rows if r.get("agent") in agents}


def interpreted() -> bool:
    """Whether kernels run under Triton's interpreter in this process (no GPU)."""
    return os.environ.get("TRITON_INTERPRET", "0") not in ("", "0")


def starter_hashes() -> set[str]:
    files = [*STARTERS.glob("[a-z]*.py"), *(STARTERS / "cuda").glob("[a-z]*.py")]
    return {sha256_of(p) for p in files} - {""}


def workspace_of(path: Path) -> Path | None:
    """The nearest folder above the file that holds a run's .autokernel/ (optimized/<t>.py and
    .autokernel/verify/<t>.py both lie inside their workspace)."""
    for parent in Path(path).resolve().parents:
        if (parent / layout.SCRATCH).is_dir():
            return parent
    return None


def require_judged(path: Path, workspace: Path | None = None) -> None:
    """Raise UnjudgedKernel unless the file is judged (see the module docstring) and clean."""
    if os.environ.get(TRUST_ENV) == "1":
        return
    path = Path(path)
    try:
        data = path.read_bytes()
    except OSError:
        return  # the loader reports a missing or unreadable file in its own words
    digest = hashlib.sha256(data).hexdigest()
    workspace = workspace or workspace_of(path)
    passed = passed_hashes(workspace) if workspace else set()
    known = starter_hashes() | passed
    if digest in passed and interpreted() and digest not in starter_hashes():
        if digest not in passed_hashes(workspace, OUR_AGENTS):
            raise UnjudgedKernel(
                f"{path}: an agent wrote this kernel, and under Triton's interpreter (no GPU) a "
                "kernel reads and writes any memory of the process that runs it, yours here; "
                f"verify it on a GPU machine, or read it and set {TRUST_ENV}=1"
            )
    if digest not in known:
        where = f"{workspace / layout.VERDICTS}" if workspace else "no workspace found above it"
        raise UnjudgedKernel(
            f"{path}: no PASS verdict recorded this exact file (sha256 {digest[:12]}; {where}); "
            f"evaluate it with `autokernel run`, or set {TRUST_ENV}=1 to load it anyway"
        )
    try:
        source = data.decode("utf-8")
        findings = check_source(source)
    except (UnicodeDecodeError, SyntaxError, UnjudgeableSource) as exc:
        raise UnjudgedKernel(
            f"{path}: fails the static guard now: {exc}; set {TRUST_ENV}=1 to load it anyway"
        ) from None
    if findings:
        raise UnjudgedKernel(
            f"{path}: fails the static guard now: {findings[0]}; set {TRUST_ENV}=1 to load it "
            "anyway"
        )
    if builds_native_code(source):
        raise UnjudgedKernel(
            f"{path}: builds native code (torch.utils.cpp_extension.load_inline); its C++/CUDA "
            "ran only in the sandbox and the guard cannot read it, so nothing says what it does "
            f"in your process: read it, then set {TRUST_ENV}=1 to load it"
        )


def builds_native_code(source: str) -> bool:
    """Whether the file names torch's extension builder (the only way to native code that the
    static guard lets through). The code it builds runs at import, with the importer's rights
    and environment: a constructor in the C++ source read the user's key in verify and wrote it
    to disk. Judged by names, as the guard sees the file."""
    tree = syntax.parse(source)
    for node in ast.walk(tree):
        names = [node.attr] if isinstance(node, ast.Attribute) else []
        if isinstance(node, ast.Import | ast.ImportFrom):
            names = [getattr(node, "module", None) or "", *(a.name for a in node.names)]
        if isinstance(node, ast.Name):
            names = [node.id]
        if any(part in NATIVE_BUILDERS for name in names for part in name.split(".")):
            return True
    return False
