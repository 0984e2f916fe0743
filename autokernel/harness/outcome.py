"""What came back from one worker run, and the verdict it comes to when the judge gave none: a
timeout, a worker that crashed or was killed, a reply that cannot be read, or a judge that ran
out of GPU memory while the candidate's process held it."""

from __future__ import annotations

import signal
from dataclasses import dataclass

from autokernel.harness.interleave import Comparison
from autokernel.harness.verdict import Check, Status, Verdict


@dataclass
class Outcome:
    """What came back from one worker run."""

    result: Verdict | Comparison | None  # the judge's result; None when the worker failed it
    phase: str  # the phase it was last in; "" while the worker had not answered at all
    timed_out: bool = False
    returncode: int = 0
    stderr: str = ""
    unreadable: str = ""  # why a reply could not be read, when the worker was still alive
    starved: str = ""  # the judge's own GPU allocation that failed while the worker held memory
    cap_note: str = ""  # why the worker's processes and threads were not capped (task_cap.py)


def verdict_of(out: Outcome, timeout_s: float) -> Verdict:
    if out.timed_out:
        where = out.phase
        return Verdict(
            status=Status.TIMEOUT, message=f"TIMEOUT in {where}: no verdict after "
            f"{timeout_s:g} s; the process group was killed",
            failure=Check(where, "", "", False, f"killed after {timeout_s:g} s in {where}"),
            stderr_tail=out.stderr,
        )  # fmt: skip
    if out.starved:
        message = (f"the judge ran out of GPU memory while the kernel's process held it "
                   f"({out.starved}); keep no more memory than the output")  # fmt: skip
        return Verdict(
            status=Status.CRASH, message=f"CRASH in {out.phase}: {message}",
            failure=Check(out.phase, "", "", False, message), stderr_tail=out.stderr,
        )  # fmt: skip
    if isinstance(out.result, Verdict):
        verdict = out.result
        verdict.stderr_tail = out.stderr if verdict.status is not Status.PASS else ""
        return verdict
    where = out.phase or "start-up"
    if out.unreadable:
        message = f"the kernel's process sent a reply the judge cannot read: {out.unreadable}"
        return Verdict(
            status=Status.REJECTED, message=f"REJECTED in {where}: {message}",
            failure=Check(where, "", "", False, message), stderr_tail=out.stderr,
        )  # fmt: skip
    if out.returncode < 0:
        name = signal.Signals(-out.returncode).name
        what = f"killed by {name}" + (" (segmentation fault)" if name == "SIGSEGV" else "")
        if name == "SIGINT" and "KeyboardInterrupt" in out.stderr:
            # The worker has its own session, so no Ctrl-C reaches it: Python ends a process
            # with SIGINT when a KeyboardInterrupt (here the candidate's own) goes uncaught.
            what = "ended by a KeyboardInterrupt the candidate's code raised"
    else:
        what = f"exited with code {out.returncode} without a verdict"
    if "illegal memory access" in out.stderr:
        what += ": illegal memory access"
    return Verdict(
        status=Status.CRASH, message=f"CRASH in {where}: worker {what}",
        failure=Check(where, "", "", False, f"worker {what}\n{out.stderr[-2000:]}"),
        stderr_tail=out.stderr,
    )  # fmt: skip
