"""The docs follow the code: every repository path README.md, program.md and docs/*.md name
(slash-style, as `autokernel/run/state.py` or `benchmarks/results/`) exists, so a module that
moves takes its mentions along. Paths inside a run directory (`.autokernel/state.json`,
`optimized/<target>.py`) and placeholders (`<type>`, `*`) are not the repository's."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DOCS = [ROOT / "README.md", ROOT / "program.md", *sorted((ROOT / "docs").glob("*.md"))]
# a run of name/ segments and a last name, not inside a URL, a word or another path
PATH = re.compile(r"(?<![\w./~$<{:-])((?:\.?[\w-]+/)+[\w.<>*-]*)")


def mentioned_paths(text: str) -> set[str]:
    """Slash paths whose first part is a top-level entry of the repository or a folder of the
    package (`agents/prompt.py` is autokernel/agents/prompt.py); others are not ours."""
    tops = {p.name for p in ROOT.iterdir()}
    package = {p.name for p in (ROOT / "autokernel").iterdir() if p.is_dir()}
    found = set()
    for match in PATH.finditer(text):
        path = match.group(1).rstrip(".,:;)")
        first = path.split("/")[0]
        if re.search(r"[<>*]", path) or not (first in tops or first in package):
            continue
        found.add(path if first in tops else f"autokernel/{path}")
    return found


def test_the_finder_reads_paths_as_the_docs_write_them():
    text = (
        "see `autokernel/run/state.py`, agents/prompt.py and benchmarks/results/, "
        "not optimized/<target>.py, .autokernel/state.json, GB/s, https://x.org/tests/a"
    )
    assert mentioned_paths(text) == {
        "autokernel/run/state.py", "autokernel/agents/prompt.py", "benchmarks/results/",
    }  # fmt: skip


def test_every_path_the_docs_name_exists():
    missing = [
        f"{doc.relative_to(ROOT)}: {path}"
        for doc in DOCS
        for path in sorted(mentioned_paths(doc.read_text()))
        if not (ROOT / path).exists()
    ]
    assert not missing, "paths the docs name that are not in the repository:\n" + "\n".join(missing)
