"""Resuming a run: check that the state, results.tsv, the attempt refs and the branch agree, then
finish whatever a crash or kill interrupted.

The four are written at different instants and can be changed by hand (a counter edited, a
branch deleted, a row appended). Acting on a state that disagrees with them writes duplicate rows
or leaves the branch on a reverted commit, so every disagreement is either repaired, and the
repair said, or the run stops with a message that says what to do.
"""

from __future__ import annotations

import math
from pathlib import Path

from autokernel.harness.verdict import Verdict
from autokernel.run import layout
from autokernel.run.driver import Driver, QueueDriver
from autokernel.run.night_clock import recorded_seconds
from autokernel.run.state import FINISHED, InFlight, State
from autokernel.run.workspace import BRANCH_PREFIX, Workspace
from autokernel.targets import TARGET_NAME


class RunError(Exception):
    """The run cannot go on (disk full, the branch changed under us): state is saved, and the
    message says what to do before `--resume`."""


def check_branch(ws: Workspace, state: State) -> None:
    """The run's branch exists and is checked out; checked before every commit and at resume,
    because a commit on a deleted branch starts an unrelated history and the run goes on."""
    name = BRANCH_PREFIX + state.tag
    if ws.branch_head(state.tag) is None:
        restore = (
            f" Its last commit was {state.head[:12]}: `git branch {name} {state.head[:12]}` "
            "restores it, then `autokernel run --resume`."
            if state.head
            else " Start a new run."
        )
        raise RunError(f"the run's branch {name} was deleted.{restore}")
    if ws.branch != name:
        where = ws.branch or "a detached commit"
        raise RunError(
            f"the run's branch {name} is no longer checked out (HEAD is on {where}): "
            f"`git checkout {name}`, then `autokernel run --resume`"
        )


def unfinished(state: State, root: Path) -> str | None:
    """What `--resume` would still do for the run in `root`, or None when nothing is left: an
    experiment cut short, or budget left (the time a kill cut short counted). A new run
    replaces the state file, so all of this would be lost."""
    if state.in_flight is not None:
        return f"experiment {state.in_flight.experiment} was cut short"
    if state.queue:
        return f"{len(state.queue)} proposed experiment(s) not yet written"
    if state.finishing:
        return f"target {state.finishing} was being finished"
    if state.ended == FINISHED:
        return None
    if state.max_tokens is not None and state.tokens >= state.max_tokens:
        return None
    left = state.budget_s - recorded_seconds(state, root)
    return f"{math.ceil(left / 60)} min of its {state.hours:g} h left" if left > 0 else None


def cross_check(loop: Driver) -> None:
    """Repair what can be repaired from the files (and say so); raise RunError otherwise."""
    s, ws = loop.state, loop.ws
    for ts in s.targets:
        if not TARGET_NAME.fullmatch(ts.name):
            raise RunError(
                f"target name {ts.name!r} in the state cannot name optimized/<name>.py; fix the "
                "name in plan.yaml and start a new run"
            )
    if s.head is not None:
        check_branch(ws, s)
    recorded = loop.results.experiments()
    attempts = ws.attempts()
    used = max(recorded | set(attempts), default=-1)
    f = s.in_flight
    if f is not None:
        later = sorted(n for n in recorded | set(attempts) if n > f.experiment)
        if later and f.commit is None:
            s.in_flight = None  # nothing committed yet: propose again under a fresh number
            f = None
        elif later:
            raise RunError(
                f"the state's experiment in flight ({f.experiment}) is older than experiment "
                f"{later[-1]} in results.tsv or refs/autokernel/attempts: the state was edited "
                "or belongs to another run; start a new run with another --tag"
            )
    if f is None and used >= s.next_experiment:
        loop.reporter.event(
            f"repaired: the state's next experiment ({s.next_experiment}) was already used in "
            f"results.tsv or refs/autokernel/attempts; continuing at {used + 1}"
        )
        s.next_experiment = used + 1
        loop.save()
    if f is None and s.head is not None:
        _off_reverted_head(loop, attempts)
    _warn_lost_rows(loop, recorded, f)


def _warn_lost_rows(loop: Driver, recorded: set[int], f: InFlight | None) -> None:
    """Say which experiments have a saved verdict but no row: a row is appended right after its
    verdict is saved, so these rows were cut from results.tsv by hand or by a damaged disk.
    Their verdicts and commits are still there; the run goes on."""
    folder = loop.ws.root / layout.VERDICTS
    verdicts = {int(p.stem) for p in folder.glob("*.json") if p.stem.isdigit()}
    lost = sorted(verdicts - recorded - ({f.experiment} if f is not None else set()))
    if lost:
        more = f" and {len(lost) - 10} more" if lost[10:] else ""
        shown = ", ".join(map(str, lost[:10])) + more
        loop.reporter.event(
            f"warning: results.tsv has no row for experiment(s) {shown}, whose verdicts are in "
            f"{folder}: the file was cut or edited; their commits are in git (git log --all)"
        )


def _off_reverted_head(loop: Driver, attempts: dict[int, str]) -> None:
    """The branch must not sit on a commit an experiment reverted: go back to that target's
    best kernel when it is below, else stop."""
    s, ws = loop.state, loop.ws
    head = ws.head()
    reverted = [n for n, sha in attempts.items() if sha == head]
    if not reverted or head != s.head:
        return
    n = reverted[0]
    rows = [r for r in loop.results.read() if r.get("experiment") == str(n)]
    if rows and rows[-1].get("status") == "keep":
        return
    names = [r.get("target") for r in rows] or [s.current]
    best = next((ts.best_commit for ts in s.targets if ts.name in names), None)
    if best is None or best == head or not ws.contains(best):
        raise RunError(
            f"HEAD {head[:12]} is experiment {n}, which was reverted (refs/autokernel/attempts/"
            f"{n}), and the state names no kept commit below it: `git reset --soft` to the last "
            "kept commit in results.tsv, or start a new run"
        )
    ws.revert(n, best)
    s.head = best
    loop.save()
    loop.reporter.event(
        f"repaired: HEAD was experiment {n}, which had been reverted; back at {best[:12]}"
    )


def recover(loop: Driver) -> None:
    """Finish whatever a crash or kill interrupted, from the state file, git and the rows."""
    cross_check(loop)
    s, ws = loop.state, loop.ws
    if s.finishing:
        ts = s.target(s.finishing)
        head = ws.head()
        if head != s.head and ws.message(head).startswith(f"optimized [{ts.name}]"):
            ts.optimized_commit = s.head = head
            ts.status, s.current, s.finishing = "done", None, None
            loop.save()
        else:
            loop.finish(ts, ts.reason, ts.final)
    f = s.in_flight
    if f is None:
        if s.head and ws.head() != s.head:
            raise RunError(
                f"branch {ws.branch} is at {ws.head()[:12]}, but the run last "
                f"recorded {s.head[:12]}: someone committed to it. Move those commits to "
                f"another branch (`git reset --soft {s.head[:12]}` keeps their changes) and "
                "resume."
            )
        ws.discard_kernel_changes()
        return
    ws.discard_kernel_changes()
    recorded = {int(r["experiment"]): r for r in loop.results.read()}.get(f.experiment)
    verdict = _saved_verdict(loop, f.experiment)
    if recorded is not None and verdict is not None and f.commit:
        loop.reporter.event(f"exp {f.experiment}: applying the recorded verdict")
        loop.conclude(verdict, recorded)
        return
    head = ws.head()
    expected = f"exp {f.experiment} [{f.target}]:"
    if f.commit is None and head != s.head and ws.message(head).startswith(expected):
        f.commit = head  # killed between the commit and the state write
    if f.queued and (f.commit is None or head != f.commit):
        s.queue.insert(0, f.entry)  # evaluated, not committed: written again in its turn
        s.in_flight = None
        loop.save()
        return
    if f.queued and recorded is None and verdict is not None:
        loop.reporter.event(f"exp {f.experiment}: deciding it again from its saved verdict")
        loop.conclude(verdict)
        return
    if f.commit is None or head != f.commit:
        s.in_flight = None  # killed before anything was committed: propose again
        if recorded is not None:  # ...but its number is taken
            s.next_experiment = max(s.next_experiment, f.experiment + 1)
        loop.save()
        return
    loop.reporter.event(f"exp {f.experiment} was interrupted: evaluating it again")
    loop.evaluate_in_flight(recorded)


def check_queue(loop: QueueDriver) -> None:
    """The parallel loop's queue against results.tsv, the attempt refs, the saved proposals
    and verdicts: nothing in it may have a row already (it would be written twice), each
    proposal must still be on disk (else it is recorded as invalid, so its number is not
    lost), a verdict that cannot be read is evaluated again, and no job runs any more."""
    s = loop.state
    recorded = loop.results.experiments() | set(loop.ws.attempts())
    for e in list(s.queue):
        n = e.experiment
        if n in recorded and e.kind == "invalid" and s.queue[0] is e:
            loop.write_invalid(e, recorded=True)  # its row was written, the state was not
            continue
        if n in recorded:
            raise RunError(
                f"experiment {n} is queued in the state but already in results.tsv or "
                "refs/autokernel/attempts: the state was edited or belongs to another run; "
                "start a new run with another --tag"
            )
        if e.kind == "kernel" and not loop.pending_path(n).is_file():
            e.kind, e.evaluated = "invalid", True
            e.why = f"its proposed kernel {loop.pending_path(n)} is missing"
            loop.reporter.event(f"repaired: exp {n}'s proposal is gone; recorded as invalid")
        elif e.kind == "kernel" and e.evaluated and _saved_verdict(loop, n) is None:
            e.evaluated = False
        if not e.evaluated:
            e.worker = None  # the slots of the killed run are gone
    numbers = {e.experiment for e in s.queue}
    if s.in_flight is not None:
        numbers.add(s.in_flight.experiment)
    folder = loop.pending_path(0).parent
    for path in folder.glob("*.py") if folder.is_dir() else ():
        if not path.stem.isdigit() or int(path.stem) not in numbers:
            path.unlink(missing_ok=True)  # saved but never numbered in the state: asked again
    if numbers and s.next_experiment <= max(numbers):
        s.next_experiment = max(numbers) + 1
    loop.save()
    if s.queue:
        loop.reporter.event(f"resuming with {len(s.queue)} proposal(s) already numbered: "
                            f"exp {', '.join(str(e.experiment) for e in s.queue)}")  # fmt: skip


def _saved_verdict(loop: Driver, n: int) -> Verdict | None:
    """Experiment n's saved verdict; None when missing or unreadable (torn by a crash, edited),
    so that the experiment is evaluated again rather than every resume failing on it."""
    try:
        return Verdict.read(loop.verdict_path(n))
    except (OSError, ValueError, KeyError, TypeError):
        return None
