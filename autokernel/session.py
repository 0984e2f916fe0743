"""From `autokernel run` flags to a running loop: targets, agent, workspace, state and signals.

Everything that can be wrong with the user's set-up (no target, an unknown kernel type, a missing
key, a dirty kernel.py, nothing to resume) is found here, before the first experiment, and
reported as one message that says what to do.
"""

from __future__ import annotations

import errno
import signal
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

from autokernel import backends
from autokernel.agents.base import Agent, AgentError
from autokernel.harness import containment
from autokernel.loop import Loop, RunError, Settings
from autokernel.mode import ModeError, parse_mode
from autokernel.orchestrate import REACH, Rules, status_lines
from autokernel.run import layout
from autokernel.run.lock import LockError, RunLock
from autokernel.run.recovery import check_branch, unfinished
from autokernel.run.results import ResultsLog
from autokernel.run.state import State, StateError, load, new_state
from autokernel.run.workspace import Workspace, WorkspaceError
from autokernel.targets import Target, TargetError, from_plan, single
from autokernel.views.live import RunView

DEFAULT_HOURS = 10.0


class SessionError(Exception):
    """Bad input or set-up: printed as the message, exit code 2."""


@dataclass
class RunRequest:
    workspace: Path = Path(".")
    hours: float | None = None
    kernel: str | None = None
    shapes: list[str] = field(default_factory=list)
    dtype: str | None = None
    plan: Path | None = None
    agent: str | None = None
    llm_model: str | None = None
    base_url: str | None = None
    agent_command: str | None = None
    max_experiments: int | None = None
    max_tokens: int | None = None
    quiet: bool = False
    resume: bool = False
    new: bool = False  # start a run even where the workspace's run is unfinished
    tag: str | None = None
    timeout_s: float | None = None
    quick: bool = False
    compile_baseline: bool | None = None
    mode: str | None = None  # eager or compile (autokernel/mode.py); None: the device's default
    unsafe_no_sandbox: bool = False  # let an LLM agent run where containment is unavailable
    workers: int | None = None  # parallel slots (autokernel/parallel.py); None: one, sequential
    ray_address: str | None = None  # an existing Ray cluster's address (autokernel/ray_pool.py)
    backend: str | None = None  # triton, cuda or any (autokernel/backends.py); None: triton


@dataclass
class Outcome:
    reason: str
    state: State
    code: int  # 0: a budget or bound reached normally; 1: a starter failed; 130: a signal
    error: str | None = None  # said on stderr: why the exit code is not 0


def _targets(req: RunRequest, root: Path) -> list[Target]:
    try:
        if req.kernel:
            return [single(req.kernel, req.shapes, req.dtype)]
        plan = req.plan or root / layout.PLAN
        if plan.exists():
            return from_plan(plan)
    except TargetError as exc:
        raise SessionError(str(exc)) from None
    raise SessionError(
        "nothing to optimize: pass --kernel TYPE (e.g. --kernel softmax), or run "
        "`autokernel profile model.py` first to write plan.yaml"
    )


def _agent(req: RunRequest, args: dict, loop_ref: list[Loop]) -> Agent:
    from autokernel.agents.factory import load_settings, make_agent

    root = req.workspace
    settings = load_settings(root / "autokernel.yaml")
    kind = args.get("kind") or settings.get("agent") or "tuner"
    from autokernel.run.briefing import PROGRAM

    if kind != "tuner" and not PROGRAM.is_file():
        raise AgentError(
            f"the playbook {PROGRAM} is missing, and an LLM agent works from it: install "
            "autokernel from a checkout (pip install -e .), or use --agent tuner"
        )

    def on_wait(message: str) -> None:
        if loop_ref:
            loop_ref[0].reporter.event(message)

    def stop() -> bool:
        return bool(loop_ref) and loop_ref[0].stop_reason() is not None

    return make_agent(
        kind, llm_model=args.get("llm_model"), base_url=args.get("base_url"),
        agent_command=args.get("agent_command"), settings=settings, on_wait=on_wait, stop=stop,
    )  # fmt: skip


def prepare(req: RunRequest, view_factory=RunView) -> tuple[Loop, RunView]:
    """Check everything and build the loop; nothing in git changes until Loop.begin/run.
    The workspace's run lock is taken first and held by the loop until execute() ends."""
    root = req.workspace.resolve()
    if root.exists() and not root.is_dir():
        raise SessionError(f"--workspace {root} is a file: give a directory")
    if req.resume and not root.is_dir():
        raise SessionError(f"nothing to resume: {root} does not exist; check --workspace")
    try:
        root.mkdir(parents=True, exist_ok=True)  # a new run may name a new directory
        lock = RunLock(root).acquire()
    except (LockError, OSError) as exc:
        raise SessionError(str(exc)) from None
    req.workspace = root
    try:
        loop, view = _build(req, view_factory)
    except BaseException:
        lock.release()
        raise
    loop.lock = lock
    return loop, view


def _build(req: RunRequest, view_factory) -> tuple[Loop, RunView]:
    import torch

    root = req.workspace
    damaged = None
    try:
        previous = load(root)
    except StateError as exc:
        if req.resume:
            raise SessionError(str(exc)) from None
        previous, damaged = None, root / layout.STATE_FILE  # a new run replaces it, kept aside
    why = None if req.resume or previous is None else unfinished(previous, root)
    if why and not req.new:  # a forgotten --resume must not cost the night
        raise SessionError(
            f"run {previous.tag} in {root} is unfinished ({why}): `autokernel run --resume` "
            f"continues it; `autokernel run --new ...` starts another (run {previous.tag} keeps "
            "its branch and rows but can no longer be resumed)"
        )
    on_gpu = torch.cuda.is_available()
    try:
        mode = parse_mode(req.mode, "cuda" if on_gpu else "cpu")
    except ModeError as exc:
        raise SessionError(str(exc)) from None
    try:
        backend = backends.parse(req.backend)
    except backends.BackendError as exc:
        raise SessionError(str(exc)) from None
    if req.resume:
        if previous is None:
            raise SessionError(f"nothing to resume in {root}: start a run without --resume")
        state = previous
        if req.mode is not None and mode != state.mode:
            raise SessionError(f"run {state.tag} was started with --mode {state.mode}; resume "
                               "it without --mode, or start a new run")  # fmt: skip
        if req.backend is not None and backend != state.backend:
            raise SessionError(f"run {state.tag} was started with --backend {state.backend}; "
                               "resume it without --backend, or start a new run")  # fmt: skip
        args = {**state.agent_args, **_given_agent_args(req)}
        if req.hours is not None:
            state.hours = req.hours
        if req.max_tokens is not None:
            state.max_tokens = req.max_tokens
    else:
        targets = _targets(req, root)
        args = _given_agent_args(req)
        state = None
    try:
        kinds = [t.kernel_type for t in (targets if state is None else
                                         [ts.target for ts in state.targets])]  # fmt: skip
        backends.check(backend if state is None else state.backend, kinds, on_gpu)
    except backends.BackendError as exc:
        raise SessionError(str(exc)) from None
    loop_ref: list[Loop] = []
    try:
        agent = _agent(req, args, loop_ref)
    except AgentError as exc:
        raise SessionError(str(exc)) from None
    refused, sandbox_warning = containment.refusal(agent.name, req.unsafe_no_sandbox)
    if refused:
        raise SessionError(refused)
    containment.hide(root)  # autokernel.yaml, results.tsv, .git: even inside the project
    try:
        ws = Workspace.open(root)
        results = ResultsLog(root / layout.RESULTS)
        if state is None:
            tag = req.tag or time.strftime("%Y%m%d-%H%M%S")
            state = new_state(tag, agent.name, req.hours or DEFAULT_HOURS, targets, req.max_tokens,
                              mode=mode, reach=REACH if on_gpu else 0.0,
                              backend=backend)  # fmt: skip
            state.agent_args = args
            # numbers already used, also by an earlier run's attempt refs, or given by a run
            # replaced with --new (its queue, its experiment in flight), are never reused
            used = results.experiments() | set(ws.attempts())
            if previous is not None:
                flight = previous.in_flight
                used |= {previous.next_experiment - 1, flight.experiment if flight else -1}
            state.next_experiment = max(used, default=-1) + 1
            ws.check_can_start(tag)
        else:
            state.agent = agent.name
            state.agent_args = args
            ws.clear_stale_git_locks()  # a driver killed mid-git leaves one behind
            if ws.branch_head(state.tag) is None:
                check_branch(ws, state)  # raises, saying how to restore the deleted branch
            if ws.branch != f"autokernel/{state.tag}":
                ws.resume(state.tag)
    except (WorkspaceError, RunError) as exc:
        raise SessionError(str(exc)) from None
    settings = Settings(
        on_gpu=on_gpu,
        rules=Rules(mode=state.mode, reach=state.reach),
        timeout_s=req.timeout_s or Settings.timeout_s,
        quick=req.quick,
        compile_baseline=on_gpu if req.compile_baseline is None else req.compile_baseline,
        max_experiments=req.max_experiments,
    )
    view = view_factory(root, req.quiet or not sys.stdout.isatty())
    for line in _intro(state, agent, on_gpu, root):
        view.event(line)
    if sandbox_warning:
        view.event(sandbox_warning)
    parallel = _parallel(req, state)
    if parallel:
        loop: Loop = _parallel_loop(parallel, root, (ws, state, agent, results, settings, view))
    else:
        loop = Loop(ws, state, agent, results, settings, view)
    loop_ref.append(loop)
    if damaged is not None:
        kept = damaged.with_name(f"{damaged.name}.damaged")
        try:
            damaged.replace(kept)  # never read again, but not destroyed: the user may want it
        except OSError as exc:
            raise SessionError(f"cannot move the damaged {damaged} aside: {exc}") from None
        view.event(f"note: the earlier run's state file was damaged; kept as {kept}, and this "
                   "new run starts its own")  # fmt: skip
    if why:
        view.event(f"note: the unfinished run {previous.tag} stays on its branch; this new run "
                   "replaces its state, so it can no longer be resumed")  # fmt: skip
    return loop, view


def _parallel(req: RunRequest, state: State) -> dict:
    """--workers/--ray-address as given, else as the run was started (a resumed queue must
    go on where its proposals can be evaluated)."""
    given = {"workers": req.workers, "ray_address": req.ray_address}
    given = {k: v for k, v in given.items() if v is not None}
    state.parallel = given or state.parallel
    return state.parallel


def _parallel_loop(parallel: dict, root: Path, parts: tuple) -> Loop:
    """The parallel loop the flags ask for (autokernel.parallel.open_parallel_loop)."""
    from autokernel.parallel import open_parallel_loop
    from autokernel.pool import PoolError

    try:
        return open_parallel_loop(parallel, root / layout.WORKERS, parts)
    except PoolError as exc:
        raise SessionError(str(exc)) from None


def _intro(state: State, agent: Agent, on_gpu: bool, root: Path) -> list[str]:
    """Say what is about to happen, before the first minute of silence."""
    import torch

    device = (
        f"GPU {torch.cuda.get_device_name()}"
        if on_gpu
        else "no GPU: the Triton interpreter runs the kernels on the CPU at small sizes "
        "(timings are CPU figures, not GPU speed)"
    )
    how = "built in, searches each kernel's SEARCH_SPACE" if agent.name == "tuner" else "LLM"
    names = ", ".join(ts.name for ts in state.targets)
    return [
        f"autokernel run {state.tag} in {root}: {device}",
        f"agent {agent.name} ({how}); targets: {names}; budget {state.hours:g} h; "
        f"ranked against {state.mode} (--mode); backend {state.backend}",
        "each experiment: edit kernel.py -> commit -> five-stage check -> benchmark -> keep "
        f"or revert; rows in results.tsv, log in {root / layout.RUN_LOG}",
    ]


def _given_agent_args(req: RunRequest) -> dict:
    given = {"kind": req.agent, "llm_model": req.llm_model, "base_url": req.base_url,
             "agent_command": req.agent_command}  # fmt: skip
    return {k: v for k, v in given.items() if v is not None}


def execute(loop: Loop, view: RunView, resume: bool) -> Outcome:
    """Run with Ctrl-C handled: the first press stops after the current experiment, a second
    one (or SIGTERM) stops now; either way the state on disk is resumable."""
    presses = []

    def on_sigint(signum, frame) -> None:
        presses.append(signum)
        if len(presses) > 1:
            raise KeyboardInterrupt
        loop.stop_requested = True
        view.event("Ctrl-C: stopping after this experiment (press again to stop now)")

    def on_sigterm(signum, frame) -> None:
        raise KeyboardInterrupt

    old_int = signal.signal(signal.SIGINT, on_sigint)
    old_term = signal.signal(signal.SIGTERM, on_sigterm)
    try:
        with view:
            if not resume:
                loop.begin()
            reason = loop.run()
        if loop.starter_failures:  # nothing was optimized for these: not a night's success
            failed = "; ".join(loop.starter_failures)
            error = f"the shipped starter could not be evaluated, so nothing was tried: {failed}"
            return Outcome(reason, loop.state, 1, error)
        return Outcome(reason, loop.state, 0)
    except KeyboardInterrupt:
        loop.state.ended = "stopped now by a signal; continue with --resume"
        _save_quietly(loop)
        return Outcome(loop.state.ended, loop.state, 130)
    except (RunError, WorkspaceError, AgentError) as exc:
        loop.state.ended = f"stopped: {exc}"
        _save_quietly(loop)
        raise SessionError(str(exc)) from None
    except OSError as exc:
        if exc.errno not in _FULL_OR_FORBIDDEN:
            raise _internal(loop, view, exc) from None
        # a full disk or a folder made read-only under the run (state.json, a verdict, the
        # log): the machine's, not a bug; the files are written so that --resume goes on
        loop.state.ended = f"stopped: {exc}"
        saved = _save_quietly(loop)
        raise SessionError(
            f"cannot write: {exc}. Free space or fix permissions, then `autokernel run --resume` "
            "continues the run" + ("" if saved else " from its last saved step")
        ) from None
    except Exception as exc:  # a bug of ours: keep the night's work resumable, say where to look
        raise _internal(loop, view, exc) from None
    finally:
        signal.signal(signal.SIGINT, old_int)
        signal.signal(signal.SIGTERM, old_term)
        loop.close()
        if loop.lock is not None:
            loop.lock.release()


# errno values of a full disk, a quota, a read-only or forbidden folder
_FULL_OR_FORBIDDEN = {errno.ENOSPC, errno.EDQUOT, errno.EROFS, errno.EACCES, errno.EPERM}


def _internal(loop: Loop, view: RunView, exc: Exception) -> SessionError:
    """A bug of ours: log the traceback, keep the night's work resumable, say where to look."""
    view.log_exception(exc)
    loop.state.ended = f"internal error: {type(exc).__name__}: {exc}"
    saved = _save_quietly(loop)
    return SessionError(
        f"internal error ({type(exc).__name__}: {exc}); the traceback is in "
        f"{view.log_path}. "
        + ("The run's state is saved: " if saved else "")
        + "`autokernel run --resume` continues it. Please report this with the log."
    )


def _save_quietly(loop: Loop) -> bool:
    """Save the state if the disk lets us; whether it did."""
    from autokernel.run.state import save

    try:
        save(loop.state, loop.ws.root)
    except OSError:
        return False
    return True


def summary(outcome: Outcome, root: Path) -> list[str]:
    s = outcome.state
    return [
        f"stopped: {outcome.reason}",
        *status_lines(s),
        f"branch autokernel/{s.tag} · rows in {root / 'results.tsv'} · log {root / layout.RUN_LOG}",
    ]
