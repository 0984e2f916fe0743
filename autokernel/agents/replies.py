"""Turn an LLM's reply into the next kernel.py and a one-line hypothesis.

A reply holds `HYPOTHESIS: <one line>` and either the whole new kernel.py in one fenced block or
SEARCH/REPLACE blocks applied in order to the current kernel.py. Every error message is written
for the LLM: it is sent back verbatim, so it says what was wrong and what the reply should hold.
"""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass

from autokernel import syntax
from autokernel.harness.guards import literal_assignment
from autokernel.harness.untrusted_text import printable

HYPOTHESIS_MAX_CHARS = 300  # an explicit HYPOTHESIS line: one results.tsv cell
FALLBACK_HYPOTHESIS_CHARS = 120  # the first prose line, when the LLM gave no HYPOTHESIS line
NO_HYPOTHESIS = "no hypothesis given"
# Every later prompt carries kernel.py, so its size is paid for each turn: a kept kernel padded
# with a 3 MB comment made every request 0.8M tokens, past any model's context. A reply is
# refused past MAX_REPLY_CHARS outside its <think> sections (a whole kernel file is 10-30 KB); a
# kernel past the larger of MAX_KERNEL_CHARS and twice the current one.
MAX_REPLY_CHARS = 256_000
MAX_KERNEL_CHARS = 100_000

FORMAT_HELP = (
    "Reply with a line `HYPOTHESIS: <one line>` and then EITHER the complete new kernel.py in "
    "one ```python fenced block, OR one or more edit blocks against the current kernel.py:\n"
    "<<<<<<< SEARCH\n<exact lines of the current kernel.py>\n=======\n<new lines>\n"
    ">>>>>>> REPLACE\n"
    "Each SEARCH text must match exactly one place; blocks apply in order."
)

_THINK_OPEN = re.compile(r"<(think|thinking)>", re.IGNORECASE)
# An opening fence and its info string. Kept free of overlapping repeats: `\s*([\w+.-]*)[^`]*$`
# backtracked quadratically on one long line ending in a backtick (seconds per 20k characters).
_FENCE = re.compile(r"^ {0,3}(`{3,})([^`]*)$")
_LANG = re.compile(r"\s*([\w+.-]*)")
_SURROGATE = re.compile("[\ud800-\udfff]")
_SEARCH = re.compile(r"^\s*<{5,9}\s*SEARCH\s*$")
_DIVIDER = re.compile(r"^\s*={5,9}\s*$")
_REPLACE = re.compile(r"^\s*>{5,9}\s*REPLACE\s*$")
_HYPOTHESIS = re.compile(r"^[\s>#*_-]*HYPOTHESIS[\s*_]*[:=-][\s*_]*(.*)$", re.IGNORECASE)


class ReplyError(Exception):
    """The reply cannot become a kernel.py; the message is meant for the LLM."""


@dataclass(frozen=True)
class _Edit:
    search: list[str]
    replace: list[str]


def parse_reply(
    reply: str, current: str, backends: tuple[str, ...] | None = None
) -> tuple[str, str]:
    """(new kernel.py source, hypothesis) from `reply`, applied to the `current` source."""
    reply = _strip_thinking(well_formed(reply).replace("\r\n", "\n"))
    if len(reply) > MAX_REPLY_CHARS:  # after the thinking, which may be long
        raise ReplyError(
            f"The reply is {len(reply):,} characters, over the {MAX_REPLY_CHARS:,} this loop "
            "reads: send only the changed code (SEARCH/REPLACE edits) or one kernel.py."
        )
    current = current.replace("\r\n", "\n")
    lines = reply.split("\n")
    if any(_SEARCH.match(line) for line in lines):
        source = apply_edits(_parse_edits(lines), current)
    else:
        source = _whole_file(lines)
    source = source.rstrip() + "\n"
    _validate(source, current, backends)
    return source, extract_hypothesis(reply)


def well_formed(text: str) -> str:
    """text with each lone surrogate replaced by U+FFFD. A provider's JSON may carry one
    (`"\\ud800"`), and it cannot be written as UTF-8: not to kernel.py, a commit message,
    results.tsv, nor the next request that quotes the reply."""
    return _SURROGATE.sub("\ufffd", text)


def _strip_thinking(text: str) -> str:
    """text without its <think>...</think> (or <thinking>) sections, in linear time: a regex
    `<(think|thinking)>.*?</\\1>` rescans to the end from each opener that is never closed,
    and a reply of many openers took minutes."""
    out, pos, at = [], 0, 0
    unclosed: set[str] = set()  # tags with no closer after the last opener tried
    while m := _THINK_OPEN.search(text, at):
        tag = m.group(1).lower()
        close = None
        if tag not in unclosed:
            close = re.compile(f"</{tag}>", re.IGNORECASE).search(text, m.end())
        if close is None:
            unclosed.add(tag)  # none after this opener: none after any later one either
            at = m.start() + 1
            continue
        out.append(text[pos : m.start()])
        pos = at = close.end()
    out.append(text[pos:])
    return "".join(out)


def extract_hypothesis(reply: str) -> str:
    """The HYPOTHESIS line, else the first prose line outside code and edit blocks."""
    prose = [line for line in _prose_lines(reply.split("\n")) if line.strip()]
    for i, line in enumerate(prose):
        if m := _HYPOTHESIS.match(line):
            # `HYPOTHESIS:` alone on its line: the hypothesis is the next line.
            text = _one_line(m.group(1)) or _one_line(" ".join(prose[i + 1 : i + 2]))
            if text:
                return text[:HYPOTHESIS_MAX_CHARS]
    for line in prose:
        text = _one_line(line.lstrip("#>*-_ \t"))
        if text:
            return text[:FALLBACK_HYPOTHESIS_CHARS]
    return NO_HYPOTHESIS


def apply_edits(edits: list[_Edit], source: str) -> str:
    """Apply SEARCH/REPLACE edits in order; each SEARCH must match exactly one run of lines."""
    lines = source.split("\n")
    for n, edit in enumerate(edits, 1):
        if not any(line.strip() for line in edit.search):
            raise ReplyError(
                f"Edit block {n} has an empty SEARCH text. To replace the whole file, send it "
                "in one ```python block instead.\n" + FORMAT_HELP
            )
        start, length = _locate(lines, edit.search, n)
        lines[start : start + length] = edit.replace
    return "\n".join(lines)


def _locate(lines: list[str], search: list[str], n: int) -> tuple[int, int]:
    """(first line, line count) of the one place `search` matches: exactly, else ignoring
    trailing whitespace and blank lines around the SEARCH text (LLMs often add either)."""
    hits = _matches(lines, search, exact=True)
    if not hits:
        trimmed = _strip_blank_ends(search)
        hits = _matches(lines, trimmed, exact=False)
        search = trimmed
    first = next(line for line in search if line.strip()).strip()
    if not hits:
        raise ReplyError(
            f"Edit block {n}: the SEARCH text starting with `{first}` matches nothing in the "
            "current kernel.py (earlier blocks already applied). Copy the lines exactly as "
            "they are, or send the complete file in one ```python block."
        )
    if len(hits) > 1:
        raise ReplyError(
            f"Edit block {n}: the SEARCH text starting with `{first}` matches {len(hits)} "
            "places in the current kernel.py. Include more surrounding lines so it matches "
            "exactly one."
        )
    return hits[0], len(search)


def _matches(lines: list[str], search: list[str], *, exact: bool) -> list[int]:
    if not search:
        return []
    norm = (lambda s: s) if exact else str.rstrip
    want = [norm(s) for s in search]
    have = [norm(s) for s in lines]
    k = len(want)
    return [i for i in range(len(have) - k + 1) if have[i : i + k] == want]


def _strip_blank_ends(block: list[str]) -> list[str]:
    start, end = 0, len(block)
    while start < end and not block[start].strip():
        start += 1
    while end > start and not block[end - 1].strip():
        end -= 1
    return block[start:end]


def _parse_edits(lines: list[str]) -> list[_Edit]:
    edits: list[_Edit] = []
    state, search, replace = "out", [], []
    for line in lines:
        if state == "out":
            if _SEARCH.match(line):
                state, search, replace = "search", [], []
        elif state == "search":
            if _DIVIDER.match(line):
                state = "replace"
            elif _SEARCH.match(line) or _REPLACE.match(line):
                break
            else:
                search.append(line)
        elif _REPLACE.match(line):
            edits.append(_Edit(search, replace))
            state = "out"
        elif _SEARCH.match(line) or _DIVIDER.match(line):
            break
        else:
            replace.append(line)
    if state != "out":
        raise ReplyError(
            f"Edit block {len(edits) + 1} is incomplete: each block needs the three marker "
            "lines `<<<<<<< SEARCH`, `=======` and `>>>>>>> REPLACE`, in that order.\n"
            + FORMAT_HELP
        )
    return edits


def _fenced_blocks(lines: list[str]) -> list[tuple[str, list[str]]]:
    """(language tag, body lines) of each fenced block; an unclosed one raises."""
    blocks: list[tuple[str, list[str]]] = []
    i = 0
    while i < len(lines):
        m = _FENCE.match(lines[i])
        if not m:
            i += 1
            continue
        ticks, lang = m.group(1), _language(m.group(2))
        end = next((j for j in range(i + 1, len(lines)) if _closes(lines[j], ticks)), None)
        if end is None:
            raise ReplyError(
                "A ``` code block is never closed (was the reply cut off?). Close the block, "
                "or send SEARCH/REPLACE edits to keep the reply short.\n" + FORMAT_HELP
            )
        blocks.append((lang, lines[i + 1 : end]))
        i = end + 1
    return blocks


def _language(info: str) -> str:
    """The language tag at the start of a fence's info string ("python" of "python title=x")."""
    m = _LANG.match(info)
    return m.group(1).lower() if m else ""


def _closes(line: str, ticks: str) -> bool:
    """A closing fence: only backticks, at least as many as the opening one."""
    s = line.strip()
    return s.startswith(ticks) and not s.strip("`")


def _whole_file(lines: list[str]) -> str:
    blocks = [b for lang, b in _fenced_blocks(lines) if lang in ("", "python", "py", "python3")]
    if len(blocks) > 1:
        blocks = [b for b in blocks if any("def kernel_fn" in line for line in b)]
    if not blocks:
        raise ReplyError(
            "The reply holds no code: no python block and no edit blocks.\n" + FORMAT_HELP
        )
    if len(blocks) > 1:
        raise ReplyError(
            "The reply holds several python blocks that define kernel_fn; send exactly one "
            "holding the complete kernel.py.\n" + FORMAT_HELP
        )
    return "\n".join(blocks[0])


def _prose_lines(lines: list[str]) -> list[str]:
    """Lines outside fenced blocks and edit blocks (an unclosed fence hides the rest)."""
    out: list[str] = []
    fence: str | None = None
    in_edit = False
    for line in lines:
        if fence is not None:
            if _closes(line, fence):
                fence = None
        elif in_edit:
            in_edit = not _REPLACE.match(line)
        elif m := _FENCE.match(line):
            fence = m.group(1)
        elif _SEARCH.match(line):
            in_edit = True
        else:
            out.append(line)
    return out


def _validate(source: str, current: str, backends: tuple[str, ...] | None = None) -> None:
    limit = max(MAX_KERNEL_CHARS, 2 * len(current))
    if len(source) > limit:
        raise ReplyError(
            f"The new kernel.py is {len(source):,} characters, over the limit of {limit:,}: "
            "every later prompt carries it. Drop long comments, dead code and unrolled copies."
        )
    if _normalized(source) == _normalized(current):
        raise ReplyError(
            "No change: the resulting kernel.py is identical to the current one. Propose a "
            "concrete change.\n" + FORMAT_HELP
        )
    try:
        tree = syntax.parse(source)
    except SyntaxError as e:
        lines = source.split("\n")
        where = f"line {e.lineno}" if e.lineno else "somewhere"
        text = lines[e.lineno - 1].strip() if e.lineno and e.lineno <= len(lines) else ""
        shown = f" (`{text}`)" if text else ""
        raise ReplyError(
            f"The new kernel.py is not valid Python: {where}{shown}: {e.msg}. Fix it and send "
            "the corrected code."
        ) from None
    names = _top_level_names(tree)
    missing = [n for n in ("kernel_fn", "KERNEL_TYPE") if n not in names]
    if missing:
        raise ReplyError(
            f"The new kernel.py no longer defines {' and '.join(missing)} at module level; the "
            "harness calls kernel_fn and reads KERNEL_TYPE. Keep both."
        )
    old, new = _literal(current, "KERNEL_TYPE"), _literal(source, "KERNEL_TYPE")
    if old is not None and new != old:
        raise ReplyError(f"KERNEL_TYPE must stay {old!r} (the reply set {new!r}).")
    backend = _literal(source, "BACKEND") or "triton"
    if backends is not None and backend not in backends:
        allowed = " or ".join(f'BACKEND = "{b}"' for b in backends)
        raise ReplyError(f"This run allows {allowed} (the reply set {backend!r}); keep to it.")


def _top_level_names(tree: ast.Module) -> set[str]:
    names: set[str] = set()
    for node in tree.body:
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            names.add(node.name)
        elif isinstance(node, ast.Assign):
            names.update(t.id for t in node.targets if isinstance(t, ast.Name))
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            names.add(node.target.id)
        elif isinstance(node, ast.Import | ast.ImportFrom):
            names.update((a.asname or a.name).split(".")[0] for a in node.names)
    return names


def _literal(source: str, name: str) -> object | None:
    """A top-level literal assignment's value, None when there is none or it is no literal: a
    reply's `KERNEL_TYPE = {[]: 1}` made ast.literal_eval raise TypeError, past the loop."""
    return literal_assignment(source, name)


def _normalized(source: str) -> str:
    return "\n".join(line.rstrip() for line in source.strip().split("\n"))


def _one_line(text: str) -> str:
    """One line of printable text: a hypothesis lands in the terminal, git log and results.tsv,
    so an escape sequence in the reply must not come along (untrusted_text.py)."""
    return " ".join(printable(text).split())
