"""Worker processes started before their request, and the one spare kept warm for the next one.

Start-up (interpreter, torch, triton, harness and spec imports) is 3.6-5.2 s of each evaluation
on an H200, often half of it. A spare does that work while the previous evaluation runs or the
agent proposes, then blocks on stdin. Isolation is unchanged: a worker serves one evaluation
and exits, and a spare has run no candidate code when its request arrives.

Rules a spare must pass at hand-over, else it is closed and a cold worker starts instead:
- the same mode: TRITON_INTERPRET must be set before triton is imported, so a spare is started
  either for the CPU interpreter (force_cpu) or for the default device ("auto": the worker asks
  torch whether CUDA is there, as a cold worker does);
- the same environment: a spare gets worker_env() as of its start (secrets already stripped);
  if the caller's would differ now, a changed setting must reach the worker, so it is discarded;
- alive: one killed while it waited (OOM killer, a user) is replaced.

The sandbox starts the spare once the current worker is ready (so two start-ups never compete),
beside the running evaluation on a GPU, where the worker holds off its timing until the spare is
ready (worker.await_quiet); under the CPU interpreter a timed request would share its measured
cores with the spare's imports, so there the spare starts when the worker is done.
A candidate run with guards off could, as the same user, reach the spare beside it (its stdin
or working directory); with guards on it can do no I/O at all.

At most one spare exists. It is killed at exit (atexit) and by a caller that is interrupted;
if the parent is killed outright, the spare and a worker mid-evaluation notice within half a
second that their parent is gone and kill themselves (worker.watch_parent), so nothing is left
holding the GPU. On a GPU the spare creates its CUDA context while it waits, which costs an idle
context's memory and takes the context's start-up out of the next evaluation.
"""

from __future__ import annotations

import atexit
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
from dataclasses import dataclass
from pathlib import Path

from autokernel.harness import cache_tiers, containment, task_cap
from autokernel.harness.channel import read_untrusted
from autokernel.harness.worker import PARENT_ENV

READY = "ready"  # the file a worker creates once its imports are done: "cuda" or "cpu"


@dataclass
class Worker:
    """One worker process in its own session (so killing its group reaches all it started) and
    its own working directory (progress, verdict, stdout, stderr)."""

    proc: subprocess.Popen
    work: Path
    force_cpu: bool
    env: dict[str, str]
    owner: int  # the pid that started it: a forked copy of the parent must not kill it
    sandbox: str = containment.NONE  # containment.kind() when it started
    cgroup: task_cap.PidsCgroup | None = None  # its pids cgroup, where that is the cap
    cap_note: str = ""  # why its tasks are not capped; "" when they are (task_cap.py)

    @classmethod
    def start(cls, force_cpu: bool, env: dict[str, str], trusted: bool = False) -> Worker:
        """trusted: a worker that will never import candidate code (the baseline worker); it
        alone may write the trusted cache (cache_tiers.py)."""
        work = Path(tempfile.mkdtemp(prefix="autokernel-worker-"))
        mode = "cpu" if force_cpu else "auto"
        # stdout is the channel to the judge (the worker moves its own fd 1 to work/stdout
        # before anything else runs); the one argv list is what containment wraps.
        argv = [sys.executable, "-m", "autokernel.harness.worker", str(work), mode]
        tiered = cache_tiers.worker_env({**env, PARENT_ENV: str(os.getpid())}, work, trusted)
        # The baseline worker's torch.compile pool is ours, not a candidate's: never capped.
        cgroup, note = (None, "") if trusted else task_cap.apply(containment.kind(), tiered)
        argv, full_env = containment.wrap(argv, tiered, work, trusted)
        if cgroup is not None:
            argv = cgroup.wrap(argv)
        try:
            with (work / "stderr").open("w") as err:
                proc = subprocess.Popen(
                    argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=err, cwd=work,
                    env=full_env, start_new_session=True,
                )  # fmt: skip
        except BaseException:
            if cgroup is not None:
                cgroup.close()
            raise
        return cls(proc, work, force_cpu, dict(env), os.getpid(), containment.kind(), cgroup, note)

    @property
    def pid(self) -> int:
        return self.proc.pid

    def ready(self) -> bool:
        """Whether its imports are done (it may have died since: see alive)."""
        return (self.work / READY).exists()

    def device(self) -> str:
        """The device it found once ready: "cuda", or "cpu" for the interpreter; "" before."""
        return read_untrusted(self.work / READY, 16).decode(errors="replace")

    def alive(self) -> bool:
        return self.proc.poll() is None

    def hand_over(self, req: dict) -> None:
        """Send the first request (one JSON line; the judge's later ones follow on the same
        pipe); raises OSError (BrokenPipeError) if the worker is already gone."""
        assert self.proc.stdin is not None
        self.proc.stdin.write(json.dumps(self.inside(req)).encode() + b"\n")
        self.proc.stdin.flush()

    def inside(self, msg: dict) -> dict:
        """`msg` with its kernel file(s) ("file", "files") copied into the worker's own folder
        when it is sandboxed: the workspace is not visible inside."""
        if self.sandbox == containment.NONE:
            return msg
        return containment.hand_in(msg, self.work)

    def kill(self) -> None:
        """SIGKILL the whole group: a hung GPU kernel cannot be interrupted, only killed, and
        the candidate may have left children behind."""
        if self.owner != os.getpid():
            return
        try:
            os.killpg(self.proc.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
        for pipe in (self.proc.stdin, self.proc.stdout):
            if pipe is not None and not pipe.closed:
                try:
                    pipe.close()
                except OSError:
                    pass
        self.proc.wait()
        if self.cgroup is not None:  # a setsid daemon left its group, never its cgroup
            self.cgroup.kill_all()

    def close(self) -> None:
        if self.owner != os.getpid():
            return
        self.kill()
        if self.cgroup is not None:
            self.cgroup.close()
        shutil.rmtree(self.work, ignore_errors=True)


_lock = threading.Lock()
_spare: Worker | None = None


def take(force_cpu: bool, env: dict[str, str]) -> tuple[Worker, bool]:
    """A worker for one request: the spare if it fits (True), else one started now (False)."""
    global _spare
    with _lock:
        spare, _spare = _spare, None
    if spare is not None:
        if spare.force_cpu == force_cpu and spare.env == env and spare.alive():
            return spare, True
        spare.close()
    return Worker.start(force_cpu, env), False


def keep_warm(force_cpu: bool, env: dict[str, str]) -> None:
    """Start a spare for the next request, unless a live one for this mode is there."""
    global _spare
    with _lock:
        old = _spare
        if old is not None and old.alive() and old.force_cpu == force_cpu and old.env == env:
            return
        _spare = Worker.start(force_cpu, env)
    if old is not None:
        old.close()


def spare() -> Worker | None:
    """The current spare, if any (for diagnostics and tests)."""
    return _spare


def discard() -> None:
    """Kill the spare and remove its directory (at exit, and when the caller is interrupted)."""
    global _spare
    with _lock:
        old, _spare = _spare, None
    if old is not None:
        old.close()


atexit.register(discard)
