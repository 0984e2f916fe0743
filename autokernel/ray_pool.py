"""Slots as Ray actors on an existing cluster (`--ray-address auto|HOST:PORT|ray://HOST:PORT`).

Each slot is one actor holding one GPU (num_gpus=1, so Ray sets its CUDA_VISIBLE_DEVICES), or one
CPU on a cluster without GPUs. An actor runs eval_job.run_job: the same sandboxed evaluation as a
local slot, so the judge stays in the actor (autokernel's code) and the candidate in its bwrap
worker on that node. Every node needs autokernel installed, as for the driver.

Ray restarts a dead actor by itself (max_restarts=-1), on another node if its node is gone;
its job is never retried by Ray (max_task_retries=0): the driver re-queues it, so the row can
say so. Ray is imported only here, only when an address is given: `pip install
'autokernel[ray]'`.
"""

from __future__ import annotations

import logging
import os
import socket
import threading
from pathlib import Path
from typing import Any

from autokernel.eval_job import Job, run_job, scrub_environment
from autokernel.pool import DONE, LOST, STARTED, Event, EventQueue, PoolError

RAY_HINT = "pip install 'autokernel[ray]'"


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

    def run(self, job: dict[str, Any]) -> dict[str, Any]:
        return run_job(Job.from_json(job))


def _import_ray() -> Any:
    try:
        import ray
    except ImportError:
        raise PoolError(f"--ray-address needs Ray, which is not installed: {RAY_HINT}") from None
    return ray


class RayPool(EventQueue):
    """The slots are actors; their threads report through the same event queue as LocalPool."""

    def __init__(
        self, address: str, workers: int | None, on_gpu: bool, log_dir: Path | None = None
    ) -> None:
        super().__init__()
        ray = self._ray = _import_ray()
        try:
            ray.init(address=address, log_to_driver=False, logging_level=logging.WARNING,
                     ignore_reinit_error=True)  # fmt: skip
        except (ConnectionError, RuntimeError, ValueError) as exc:
            raise PoolError(
                f"cannot reach the Ray cluster at {address!r}: {exc}. Start one with "
                "`ray start --head`, or pass its address (HOST:PORT or ray://HOST:PORT)"
            ) from None
        resources = ray.cluster_resources()
        gpus, cpus = int(resources.get("GPU", 0)), int(resources.get("CPU", 0))
        self.on_gpu = gpus > 0
        count = workers or (gpus if gpus else cpus)
        if count < 1:
            raise PoolError(f"the Ray cluster at {address!r} has no GPU or CPU to evaluate on")
        need = {"num_gpus": 1} if self.on_gpu else {"num_cpus": 1}
        remote = ray.remote(**need, max_restarts=-1, max_task_retries=0)(_Evaluator)
        self.slots = [f"r{i}" for i in range(count)]
        self._actors = {s: remote.remote() for s in self.slots}
        self._where = {s: "ray (starting)" for s in self.slots}
        self._announced: set[str] = set()

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
                self._announced.add(slot)
                self._events.put(Event(slot, "", STARTED, text=self._where[slot]))
            result = ray.get(actor.run.remote(job.to_json()), timeout=deadline_s)
        except ray.exceptions.GetTimeoutError:
            ray.kill(actor, no_restart=False)  # hung: Ray starts a fresh one
            self._lost(slot, job, "gave no answer before its deadline: killed")
        except ray.exceptions.RayError as exc:  # the actor, its node or our code in it
            self._lost(slot, job, f"{type(exc).__name__}: {str(exc).splitlines()[0][:300]}")
        else:
            self._events.put(Event(slot, job.key, DONE, result=result))

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
