"""What one experiment leaves for the reader and the agent: its results.tsv row, and the text of
a failure; plus the verdicts the loop writes itself when the harness never got to judge.
"""

from __future__ import annotations

from autokernel.harness.verdict import Check, Status, Verdict
from autokernel.run.keep_rule import Decision
from autokernel.run.results import ResultRow, RowStatus
from autokernel.run.state import InFlight, Score, TargetState

# What Python's parser raises on a file's content besides SyntaxError: a 1000-term expression
# overflows its recursion limit, a null byte is a ValueError on some versions. Such a file is the
# candidate's fault and must become a verdict, never stop the run (or every resume after it).
PARSE_ERRORS: tuple[type[Exception], ...] = (SyntaxError, RecursionError, MemoryError, ValueError)
DESCRIPTION_CHARS = 200  # a row stays one readable line


def experiment_row(
    f: InFlight, ts: TargetState, verdict: Verdict, cand: Score | None, decision: Decision
) -> ResultRow:
    """The row of an evaluated experiment (`f` is the state's in-flight record)."""
    fail = verdict.failure
    correctness = verdict.status.value + (f"@{fail.stage}" if fail and fail.stage else "")
    return ResultRow(
        experiment=f.experiment, commit=(f.commit or "")[:12] or None, target=ts.name,
        kernel_type=ts.target.kernel_type, status=RowStatus(decision.status),
        correctness=correctness,
        latency_us=cand.us if cand else None,
        throughput=cand.throughput if cand else None, unit=cand.unit if cand else None,
        pct_peak=cand.pct_peak if cand else None,
        speedup_vs_eager=cand.speedup_vs_eager if cand else None,
        speedup_vs_compile=cand.speedup_vs_compile if cand else None,
        harness_s=verdict.harness_s, agent=f.agent, tokens=f.tokens,
        description=f.hypothesis, sandbox=verdict.sandbox or None,
        backend=verdict.backend or None,
    )  # fmt: skip


def invalid_row(n: int, ts: TargetState, agent: str, tokens: int, why: str) -> ResultRow:
    """The row of a reply that held no usable kernel: no commit, no evaluation."""
    text = " ".join(f"invalid reply: {why}".split())[:DESCRIPTION_CHARS]
    return ResultRow(
        experiment=n,
        commit=None,
        target=ts.name,
        kernel_type=ts.target.kernel_type,
        status=RowStatus.INVALID,
        agent=agent,
        tokens=tokens,
        description=text,
    )


def unparsable(exc: Exception) -> Verdict:
    """The verdict of a kernel file the harness could not even parse."""
    detail = f"{type(exc).__name__}: {exc}".strip().rstrip(":")
    message = f"the file could not be parsed ({detail[:300]}); simplify the code"
    return Verdict(
        status=Status.CRASH, message=f"CRASH in import: {message}",
        failure=Check("import", "", "", False, message),
    )  # fmt: skip


def failure_text(verdict: Verdict) -> str:
    """What the agent is told about a failed experiment: message, detail, stderr's tail."""
    parts = [verdict.message]
    if verdict.failure and verdict.failure.message and verdict.failure.message != verdict.message:
        parts.append(verdict.failure.message)
    if verdict.stderr_tail:
        parts.append("stderr (tail):\n" + verdict.stderr_tail[-3000:])
    return "\n".join(parts)
