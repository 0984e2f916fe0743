"""Build the provider messages from a Context: the playbook as system, the state as one request.

The request stays under MAX_PROMPT_CHARS however long the night: the newest results rows go in
verbatim, older ones as counts, and the last failure keeps its head and tail. The current kernel
is never cut (edits are made against it, so the LLM must see every line).
"""

from __future__ import annotations

import json
import math
from collections import Counter
from dataclasses import dataclass

from autokernel.agents.base import Context
from autokernel.agents.replies import FORMAT_HELP
from autokernel.secrets import redact

MAX_PROMPT_CHARS = 60_000  # system + request; roughly 15k tokens, cheap on every provider
DESCRIPTION_CHARS = 100  # one results row's description in the table
MAX_STATUSES = 8  # distinct statuses counted in the summary of older rows


@dataclass(frozen=True)
class _Budget:
    rows: int  # newest results rows shown verbatim
    failure_chars: int
    configs: int  # newest tried CONFIGs listed
    source_chars: int  # spec, roofline and reference each


# Tried in order until the prompt fits: history and failure give way first, the kernel never.
BUDGETS = (
    _Budget(rows=15, failure_chars=4000, configs=20, source_chars=20_000),
    _Budget(rows=8, failure_chars=2000, configs=8, source_chars=20_000),
    _Budget(rows=3, failure_chars=1000, configs=0, source_chars=8000),
    _Budget(rows=1, failure_chars=500, configs=0, source_chars=3000),
)


def build_messages(ctx: Context) -> tuple[str, list[dict[str, str]]]:
    """(system prompt, messages) for a provider: the playbook, then one user request."""
    system = ctx.program
    for budget in BUDGETS:
        request = build_request(ctx, budget)
        if len(system) + len(request) <= MAX_PROMPT_CHARS:
            break
    return redact(system), [{"role": "user", "content": redact(request)}]  # no key to the LLM


def build_request(ctx: Context, budget: _Budget = BUDGETS[0]) -> str:
    sections = [
        f"# Experiment {ctx.experiment}: make `{ctx.target}` ({ctx.kernel_type}) faster",
        "## Specification\n" + trim(ctx.spec_text, budget.source_chars),
    ]
    if ctx.roofline:
        sections.append("## Where it stands\n" + trim(ctx.roofline, budget.source_chars))
    sections += [
        "## Reference (the correctness oracle in reference.py)\n"
        + _fenced(trim(ctx.reference_source, budget.source_chars)),
        "## Current best kernel.py (edit this)\n" + _fenced(ctx.kernel_source),
        "## Results so far\n" + history_text(ctx.history, budget.rows),
    ]
    if ctx.other_starter and len(ctx.other_starter) <= budget.source_chars:
        head = "## The shipped starter of the other backend (what a switch starts from)\n"
        sections.append(head + _fenced(ctx.other_starter))
    if ctx.tried_configs and budget.configs:
        shown = ctx.tried_configs[-budget.configs :]
        lines = [json.dumps(c, sort_keys=True, default=str) for c in shown]
        head = f"## CONFIGs already evaluated (newest {len(shown)} of {len(ctx.tried_configs)})"
        sections.append(head + "\n" + "\n".join(lines))
    if ctx.oversized_configs and budget.configs:
        shown = ctx.oversized_configs[-budget.configs :]
        lines = [json.dumps(c, sort_keys=True, default=str) for c in shown]
        head = "## CONFIGs that ran out of shared memory or spilled registers (stay below them)"
        sections.append(head + "\n" + "\n".join(lines))
    if ctx.in_flight or ctx.others_asking:
        sections.append(in_flight_text(ctx))
    if ctx.last_failure:
        sections.append(
            "## The last failure\n```\n" + trim(ctx.last_failure, budget.failure_chars) + "\n```"
        )
    sections.append("## Your reply\n" + FORMAT_HELP)
    return "\n\n".join(sections) + "\n"


def in_flight_text(ctx: Context) -> str:
    """What other workers are evaluating now, so that this proposal tries something else."""
    lines = ["## Being evaluated now, beside this request (propose a different idea)"]
    lines += [f"exp {f.get('experiment')}: {_one_line(f.get('hypothesis', ''))}"
              for f in ctx.in_flight]  # fmt: skip
    if ctx.others_asking:
        lines.append(f"{ctx.others_asking} other request(s) for this target are being answered "
                     "at the same time; their ideas are not known yet")  # fmt: skip
    return "\n".join(lines)


def _one_line(text: object) -> str:
    desc = " ".join(str(text).split())
    return desc if len(desc) <= DESCRIPTION_CHARS else desc[: DESCRIPTION_CHARS - 1] + "…"


def history_text(rows: list[dict[str, str]], newest: int) -> str:
    """The newest rows as a table, the older ones as counts per status and their best row."""
    if not rows:
        return "No experiments yet: this is the first."
    older, recent = rows[: max(0, len(rows) - newest)], rows[-newest:]
    parts = []
    if older:
        counts = Counter(r.get("status", "?") for r in older).most_common(MAX_STATUSES)
        tally = ", ".join(f"{n} {status}" for status, n in counts)
        line = f"{len(older)} earlier experiments ({tally})"
        best = _best(older)
        if best is not None:
            line += f"; best of them: {_row_line(best)}"
        parts.append(line + ".")
    header = "experiment | status | latency_us | speedup_vs_eager | description"
    parts.append("\n".join([header, *(_row_line(r) for r in recent)]))
    return "\n".join(parts)


def trim(text: str, limit: int) -> str:
    """At most about `limit` chars, keeping the head and the (usually more telling) tail."""
    if len(text) <= limit:
        return text
    head = limit // 3
    tail = limit - head
    cut = len(text) - head - tail
    return f"{text[:head]}\n[... {cut} characters cut ...]\n{text[-tail:]}"


def _row_line(row: dict[str, str]) -> str:
    desc = " ".join(str(row.get("description", "")).split())
    if len(desc) > DESCRIPTION_CHARS:
        desc = desc[: DESCRIPTION_CHARS - 1] + "…"
    cells = [row.get(k, "") for k in ("experiment", "status", "latency_us", "speedup_vs_eager")]
    return " | ".join([*(" ".join(str(c).split())[:20] for c in cells), desc])


def _best(rows: list[dict[str, str]]) -> dict[str, str] | None:
    """The row with the highest speedup_vs_eager (failed rows carry none)."""
    scored = [(s, r) for r in rows if (s := _number(r.get("speedup_vs_eager"))) is not None]
    return max(scored, key=lambda sr: sr[0])[1] if scored else None


def _number(value: object) -> float | None:
    try:
        x = float(str(value).rstrip("x"))
    except ValueError:
        return None
    return x if math.isfinite(x) else None


def _fenced(source: str) -> str:
    ticks = "````" if "```" in source else "```"  # a fence inside the source must not close ours
    return f"{ticks}python\n{source.rstrip()}\n{ticks}"
