"""Slots as Ray actors on an existing cluster (`--ray-address auto|HOST:PORT|ray://HOST:PORT`).

Each slot is one actor holding one GPU (num_gpus=1, so Ray sets its CUDA_VISIBLE_DEVICES), or one
CPU on a cluster without GPUs; never more slots than the cluster has of them, since an actor
that cannot be placed waits forever and its jobs would count as lost. An actor runs
eval_job.run_job: the same sandboxed evaluation as a local slot, so the judge stays in the actor
(autokernel's code) and the candidate in its bwrap worker on that node.

Every node needs the driver's autokernel. Where the driver imports it from a checkout rather
than an installed package, the actors get that directory on PYTHONPATH (it exists on this
machine, and on nodes sharing its file system); and before the first job each actor's sources
are compared with the driver's (eval_job.code_fingerprint): a cluster running other code is a
one-line error, not a night judged by another harness.

Ray restarts a dead actor by itself (max_restarts=-1), on another node if its node is gone;
its job is never retried by Ray (max_task_retries=0): the driver re-queues it, so the row can
say so. Ray is imported only here, only when an address is given: `pip install
'torch-autokernel[ray]'` (the distribution's name; `autokernel` on the index is another project).
"""

from __future__ import annotations

import logging
import os
import site
import socket
import threading
import time
from pathlib import Path
from typing import Any

import autokernel
from autokernel.eval_job import Job, code_fingerprint, run_job, scrub_environment
from autokernel.pool import DONE, LOST, STARTED, Event, EventQueue, PoolError

RAY_HINT = f"pip install 'ray[client]' (or pip install '{autokernel.DISTRIBUTION}[ray]')"
# From the actors' creation until every one has imported torch and the harness and answered:
# one node's worker start is seconds (3.6 s measured on the H200), a first placement on a
# cluster that must pull or start a node is minutes.
ACTOR_START_S = 300.0
# A TCP connection to the address before ray.init: Ray itself waits minutes on a port where
# nothing listens (over 5 min to a closed GCS port, measured), printing C++ warnings meanwhile.
CONNECT_S = 5.0
RESTART_POLL_S = 0.5  # between pings of an actor that Ray is restarting


class _Evaluator:
    """The actor's body (made remote in RayPool): one evaluation at a time."""

    def __init__(self) -> None:
        scrub_environment()
        import autokernel.harness.sandbox  # noqa: F401  (torch and the harness, once)

    def info(self) -> str:
        import ray

        gpus = ray.get_gpu_ids()
        device = f"GPU {','.join(map(str, gpus))}" if gpus else "CPU"
        return f"pid {os.getpid()} on {socket.gethostname()} {device}"

    def pid(self) -> int:
        return os.getpid()

    def code(self) -> tuple[str, str]:
        """The sources this actor judges with, and where they were imported from."""
        return code_fingerprint(), str(Path(autokernel.__file__).parent)

    def run(self, job: dict[str, Any]) -> dict[str, Any]:
        return run_job(Job.from_json(job))


def _import_ray() -> Any:
    try:
        import ray
    except ImportError:
        raise PoolError(f"--ray-address needs Ray, which is not installed: {RAY_HINT}") from None
    return ray


def check_reachable(address: str) -> None:
    """A one-line error at once for a HOST:PORT or ray://HOST:PORT where nothing answers;
    "auto" (and anything without a port) is left to Ray, which finds a local cluster itself."""
    host, sep, port = address.removeprefix("ray://").rpartition(":")
    if not sep or not port.isdigit() or not host:
        return
    try:
        socket.create_connection((host.strip("[]"), int(port)), timeout=CONNECT_S).close()
    except OSError as exc:
        raise PoolError(
            f"cannot reach the Ray cluster at {address!r}: nothing answers at {host}:{port} "
            f"({exc.strerror or exc}). Start one with `ray start --head`, or pass its address "
            "(HOST:PORT or ray://HOST:PORT)"
        ) from None


def code_path(package: Path | None = None) -> str | None:
    """The directory this driver imports autokernel from (`package`: that package folder), when
    it is a checkout (PYTHONPATH, an editable install) rather than an installed package: an
    interpreter's site-packages must not be put on another node's path."""
    root = str((package or Path(autokernel.__file__).parent).resolve().parent)
    site_dirs = [*site.getsitepackages(), site.getusersitepackages()]
    installed = {str(Path(p).resolve()) for p in site_dirs}
    return None if root in installed else root


def _runtime_env() -> dict[str, Any]:
    path = code_path()
    if path is None:
        return {}
    # ${PYTHONPATH}: Ray expands it to the node's own value, which stays after ours.
    return {"env_vars": {"PYTHONPATH": f"{path}{os.pathsep}${{PYTHONPATH}}"}}


class RayPool(EventQueue):
    """The slots are actors; their threads report through the same event queue as LocalPool."""

    def __init__(
        self, address: str, workers: int | None, on_gpu: bool, log_dir: Path | None = None
    ) -> None:
        super().__init__()
        ray = self._ray = _import_ray()
        check_reachable(address)
        try:
            ray.init(address=address, log_to_driver=False, logging_level=logging.WARNING,
                     ignore_reinit_error=True, runtime_env=_runtime_env())  # fmt: skip
        except (ConnectionError, RuntimeError, ValueError) as exc:
            raise PoolError(
                f"cannot reach the Ray cluster at {address!r}: {exc}. Start one with "
                "`ray start --head`, or pass its address (HOST:PORT or ray://HOST:PORT)"
            ) from None
        resources = ray.cluster_resources()
        gpus, cpus = int(resources.get("GPU", 0)), int(resources.get("CPU", 0))
        self.on_gpu = gpus > 0
        have = gpus if gpus else cpus
        if have < 1:
            raise PoolError(f"the Ray cluster at {address!r} has no GPU or CPU to evaluate on")
        count = min(workers or have, have)
        unit = "GPU" if self.on_gpu else "CPU"
        self.note = (f"--workers {workers}: the Ray cluster has {have} {unit}(s), so {count} "
                     "workers" if workers and workers > have else "")  # fmt: skip
        need = {"num_gpus": 1} if self.on_gpu else {"num_cpus": 1}
        remote = ray.remote(**need, max_restarts=-1, max_task_retries=0)(_Evaluator)
        self.slots = [f"r{i}" for i in range(count)]
        self._actors = {s: remote.remote() for s in self.slots}
        self._where = {s: "ray (starting)" for s in self.slots}
        self._announced: set[str] = set()
        self._code = code_fingerprint()
        self._check_code(address)

    def _check_code(self, address: str) -> None:
        """Wait for every actor to start and compare the sources it judges with: the first job
        would wait for them anyway, and a mismatch must stop the run before it begins."""
        ray, ours = self._ray, self._code
        try:
            answers = ray.get([a.code.remote() for a in self._actors.values()],
                              timeout=ACTOR_START_S)  # fmt: skip
        except ray.exceptions.GetTimeoutError:
            self.close()
            raise PoolError(f"the Ray workers at {address!r} did not start within "
                            f"{ACTOR_START_S:.0f} s: is the cluster busy with other jobs?"
                            ) from None  # fmt: skip
        except ray.exceptions.RayError as exc:
            self.close()
            raise PoolError(f"the Ray workers at {address!r} could not start autokernel: "
                            f"{str(exc).strip().splitlines()[-1][:300]} (is the driver's "
                            "autokernel installed on every node?)") from None  # fmt: skip
        for fingerprint, path in answers:
            if fingerprint != ours:
                self.close()
                mine = Path(autokernel.__file__).parent
                raise PoolError(
                    f"the Ray workers run other autokernel sources ({path}) than this driver "
                    f"({mine}): install the same autokernel on every node, or run the driver "
                    "from the cluster's own install"
                )

    def where(self, slot: str) -> str:
        return self._where[slot]

    def pid(self, slot: str) -> int:
        return int(self._ray.get(self._actors[slot].pid.remote(), timeout=60))

    def submit(self, slot: str, job: Job, deadline_s: float) -> None:
        threading.Thread(target=self._serve_ray, args=(slot, job, deadline_s),
                         daemon=True).start()  # fmt: skip

    def _serve_ray(self, slot: str, job: Job, deadline_s: float) -> None:
        ray, actor = self._ray, self._actors[slot]
        try:
            if slot not in self._announced:  # after a restart too: a new pid, maybe a new node
                self._where[slot] = ray.get(actor.info.remote(), timeout=deadline_s)
                fingerprint, path = ray.get(actor.code.remote(), timeout=deadline_s)
                if fingerprint != self._code:
                    ray.kill(actor, no_restart=False)
                    self._lost(slot, job, f"restarted on {self._where[slot]}, which runs other "
                               f"autokernel sources ({path}) than the driver")  # fmt: skip
                    return
                self._announced.add(slot)
                self._events.put(Event(slot, "", STARTED, text=self._where[slot]))
            result = ray.get(actor.run.remote(job.to_json()), timeout=deadline_s)
        except ray.exceptions.GetTimeoutError:
            ray.kill(actor, no_restart=False)  # hung: Ray starts a fresh one
            self._await_restart(actor)
            self._lost(slot, job, "gave no answer before its deadline: killed")
        except ray.exceptions.RayActorError as exc:  # its process or node died
            self._await_restart(actor)
            self._lost(slot, job, f"lost its Ray actor ({type(exc).__name__})")
        except ray.exceptions.RayError as exc:  # our code in it
            self._lost(slot, job, f"{type(exc).__name__}: {str(exc).splitlines()[0][:300]}")
        else:
            self._events.put(Event(slot, job.key, DONE, result=result))

    def _await_restart(self, actor: Any) -> None:
        """Return once Ray has restarted the actor (or given it up): the slot is free again
        when its loss is reported, and a job handed to an actor still restarting is lost too
        (one kill -9 cost an experiment two losses, of the three that make it a crash)."""
        ray = self._ray
        deadline = time.monotonic() + ACTOR_START_S
        while time.monotonic() < deadline:
            try:
                ray.get(actor.pid.remote(), timeout=max(1.0, deadline - time.monotonic()))
                return
            except ray.exceptions.ActorUnavailableError:  # restarting: ask again
                time.sleep(RESTART_POLL_S)
            except ray.exceptions.RayError:  # dead for good, or still not back: the next
                return  # job's loss says so

    def _lost(self, slot: str, job: Job, why: str) -> None:
        self._announced.discard(slot)
        self._events.put(Event(slot, job.key, LOST, text=f"worker {slot} {why}"))

    def close(self) -> None:
        for actor in self._actors.values():
            try:
                self._ray.kill(actor, no_restart=True)
            except Exception:  # a dead cluster: nothing left to kill
                pass
        self._ray.shutdown()
