"""Where parallel evaluations run: slots of one job each, and the events they report.

A slot is one worker with one GPU (CUDA_VISIBLE_DEVICES), or on a machine without one, one
interpreter process. The driver (parallel.py) submits a job to a free slot and later collects
events: PHASE while it runs, then DONE with its result, or LOST when the worker died, hung past
its deadline, or failed in our own code. A lost job costs only itself: the driver re-queues it.
LocalPool runs the slots as processes of this machine (no Ray needed); ray_pool.RayPool runs
them as Ray actors of a cluster. Both call the same sandboxed evaluation (eval_job.run_job).
"""

from __future__ import annotations

import json
import os
import queue
import signal
import socket
import subprocess
import sys
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from autokernel.eval_job import Job

DONE, LOST, PHASE, STARTED = "done", "lost", "phase", "started"
# Beyond the sandbox's own limits (the candidate's timeout plus the once-per-machine baseline
# allowance), how long a slot may stay silent before it counts as hung.
DEADLINE_MARGIN_S = 120.0
STDERR_TAIL = 1500  # characters of a lost worker's stderr quoted in the event


@dataclass
class Event:
    slot: str
    key: str  # the job's key; "" for STARTED
    kind: str  # DONE, LOST, PHASE or STARTED
    result: dict[str, Any] | None = None  # DONE: run_job's result
    text: str = ""  # LOST: why; PHASE: the phase; STARTED: where it runs (pid, host, GPU)


class Pool(Protocol):
    slots: list[str]  # names, e.g. "w0"; fixed for the pool's life
    on_gpu: bool  # its slots evaluate on GPUs
    note: str  # what the user should know about the slots it made (fewer than asked), or ""

    def where(self, slot: str) -> str:
        """Where the slot runs, in words (GPU index or CPU, host)."""
        ...

    def submit(self, slot: str, job: Job, deadline_s: float) -> None:
        """Start `job` on a free slot; its events follow through wait()."""
        ...

    def wait(self, timeout_s: float) -> list[Event]:
        """Events since the last call, waiting up to timeout_s for the first."""
        ...

    def close(self) -> None: ...


class PoolError(Exception):
    """The pool cannot start (no GPU for it, no Ray, a cluster that cannot be reached)."""


def _env() -> dict[str, str]:
    from autokernel.harness.worker_env import worker_env

    return worker_env()  # credentials stripped; the checkout on PYTHONPATH


class _Process:
    """One slot's worker process (eval_worker.py) and the thread reading its current job."""

    def __init__(self, gpu: int | None, stderr: Path | None) -> None:
        env = _env()
        if gpu is not None:
            env["CUDA_VISIBLE_DEVICES"] = str(gpu)
        err = stderr.open("ab") if stderr else subprocess.DEVNULL
        self.stderr = stderr
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "autokernel.eval_worker"], stdin=subprocess.PIPE,
            stdout=subprocess.PIPE, stderr=err, env=env, start_new_session=True,
        )  # fmt: skip
        if stderr:
            err.close()
        self.started = False

    def alive(self) -> bool:
        return self.proc.poll() is None

    def kill(self) -> None:
        try:
            os.killpg(self.proc.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
        self.proc.wait()

    def tail(self) -> str:
        try:
            text = self.stderr.read_text(errors="replace") if self.stderr else ""
        except OSError:
            return ""
        return text[-STDERR_TAIL:].strip()


class EventQueue:
    """The events the slots' threads report, collected by wait() on the driver's thread."""

    def __init__(self) -> None:
        self._events: queue.Queue[Event] = queue.Queue()

    def wait(self, timeout_s: float) -> list[Event]:
        try:
            events = [self._events.get(timeout=timeout_s)]
        except queue.Empty:
            return []
        while True:
            try:
                events.append(self._events.get_nowait())
            except queue.Empty:
                return events


class LocalPool(EventQueue):
    """N worker processes on this machine; worker i uses GPU i mod the GPU count."""

    on_gpu = False  # set per instance
    note = ""

    def __init__(self, workers: int, gpus: int, log_dir: Path | None = None) -> None:
        if workers < 1:
            raise PoolError("--workers must be at least 1")
        super().__init__()
        self.on_gpu = gpus > 0
        self.slots = [f"w{i}" for i in range(workers)]
        self._gpu = {s: (i % gpus if gpus else None) for i, s in enumerate(self.slots)}
        self._log_dir = log_dir
        self._procs: dict[str, _Process] = {}
        self._lock = threading.Lock()
        for slot in self.slots:  # all start at once: their imports overlap the first proposal
            self._start(slot)

    def where(self, slot: str) -> str:
        gpu = self._gpu[slot]
        return f"{socket.gethostname()} " + (f"GPU {gpu}" if gpu is not None else "CPU")

    def pid(self, slot: str) -> int:
        return self._procs[slot].proc.pid

    def _start(self, slot: str) -> _Process:
        stderr = self._log_dir / f"{slot}.stderr" if self._log_dir else None
        if stderr:
            stderr.parent.mkdir(parents=True, exist_ok=True)
        proc = _Process(self._gpu[slot], stderr)
        self._procs[slot] = proc
        return proc

    def submit(self, slot: str, job: Job, deadline_s: float) -> None:
        with self._lock:
            proc = self._procs.get(slot)
            if proc is None or not proc.alive():
                proc = self._start(slot)
        threading.Thread(target=self._serve, args=(slot, proc, job, deadline_s),
                         daemon=True).start()  # fmt: skip

    def _serve(self, slot: str, proc: _Process, job: Job, deadline_s: float) -> None:
        expired: list[bool] = []

        def expire() -> None:  # a hung worker: killed, so the read below sees EOF
            expired.append(True)
            proc.kill()

        timer = threading.Timer(deadline_s, expire)
        timer.start()
        try:
            self._exchange(slot, proc, job, expired)
        finally:
            timer.cancel()

    def _exchange(self, slot: str, proc: _Process, job: Job, expired: list[bool]) -> None:
        assert proc.proc.stdin is not None and proc.proc.stdout is not None
        try:
            proc.proc.stdin.write(json.dumps(job.to_json()).encode() + b"\n")
            proc.proc.stdin.flush()
        except OSError:
            pass  # already dead: the read below says so
        for raw in proc.proc.stdout:
            try:
                msg = json.loads(raw)
            except ValueError:
                continue
            if "started" in msg and not proc.started:
                proc.started = True
                where = f"pid {msg['started']} on {self.where(slot)}"
                self._events.put(Event(slot, "", STARTED, text=where))
            elif "phase" in msg:
                self._events.put(Event(slot, job.key, PHASE, text=str(msg["phase"])))
            elif "result" in msg:
                self._events.put(Event(slot, job.key, DONE, result=msg["result"]))
                return
            elif "error" in msg:
                why = f"worker {slot} failed in autokernel's code: {msg['error'][-600:]}"
                self._events.put(Event(slot, job.key, LOST, text=why))
                return
        code = proc.proc.wait()
        why = "gave no answer before its deadline: killed" if expired else f"exited ({code})"
        tail = proc.tail()
        self._events.put(Event(slot, job.key, LOST, text=f"worker {slot} {why}"
                               + (f"; stderr: {tail[-300:]}" if tail else "")))  # fmt: skip

    def close(self) -> None:
        for proc in self._procs.values():
            if proc.proc.stdin is not None:
                try:
                    proc.proc.stdin.close()
                except OSError:
                    pass
            proc.kill()
