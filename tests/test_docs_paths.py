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


# A results file of either GPU as the docs and the code cite it, by bare name
# (`h200-host-2026-12-03-cebb12b.md`)
# or as a path; `h200-<date>.md`-style placeholders are not names, nor is where a usage line
# writes its output (`--json benchmarks/results/h200-x.json`).
RESULTS = ROOT / "benchmarks" / "results"
RESULT_NAME = re.compile(
    r"(?<![\w.-])(h[12]00-[a-z0-9][a-z0-9.-]*\.(?:md|json|jsonl|tsv|log|sh|txt|yaml))(?![\w-])"
)


OUTPUT = re.compile(r"--(?:json|out)\s+\S*$")


def cited_results(text: str) -> set[str]:
    return {
        m.group(1) for m in RESULT_NAME.finditer(text)
        if not OUTPUT.search(text[text.rfind("\n", 0, m.start()) + 1 : m.start()])
    }  # fmt: skip


def test_the_results_finder_reads_names_not_placeholders():
    text = (
        "see h200-host-2026-12-03-cebb12b.md, `benchmarks/results/h200-latest.json` and "
        "h200-cuda-<date>.md, h200-YYYY-MM-DD.md, h100-ops-2026-12-06-6973d8a.md\n"
        "  x.py --json benchmarks/results/h200-new.json"
    )
    assert cited_results(text) == {
        "h200-host-2026-12-03-cebb12b.md", "h200-latest.json", "h100-ops-2026-12-06-6973d8a.md",
    }  # fmt: skip


def test_every_results_file_the_docs_and_code_cite_exists():
    """A pruned result that something still cites would send a reader to nothing; results
    files citing each other are records, left as written (benchmarks/README.md says where a
    converted one went)."""
    sources = [*DOCS, ROOT / "benchmarks" / "README.md", ROOT / "examples" / "README.md"]
    for folder in ("autokernel", "benchmarks", "kernels", "tests"):
        sources += sorted((ROOT / folder).rglob("*.py"))
    sources += [ROOT / "reference.py", ROOT / "orchestrate.py"]
    missing = [
        f"{path.relative_to(ROOT)}: {name}"
        for path in sources
        if RESULTS not in path.parents
        for name in sorted(cited_results(path.read_text(errors="replace")))
        if not (RESULTS / name).exists()
    ]
    assert not missing, "results files cited that are not in benchmarks/results:\n" + "\n".join(
        missing
    )
