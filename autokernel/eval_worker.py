"""A local pool's worker process: `python -m autokernel.eval_worker`, one per GPU slot.

It is autokernel's own code, as trusted as the driver: it never imports a candidate. Each job
(one JSON line on stdin) goes to eval_job.run_job, which hands the candidate to a sandboxed
worker of its own (harness/sandbox.py), keeping that worker's spare warm between jobs. Replies
are JSON lines on a private copy of stdout: {"started": pid} once, then per job any number of
{"phase": ...} and one {"result": ...} or {"error": ...}. fd 1 itself is pointed at stderr first,
so a library that prints cannot corrupt the channel.

The process exits when stdin closes or its parent (the driver) is gone, checked twice a second:
a driver killed with SIGKILL must not leave workers holding GPUs; its sandboxed workers follow
it (worker.watch_parent, bwrap's --die-with-parent).
"""

from __future__ import annotations

import json
import os
import sys
import threading
import time
import traceback
from typing import IO, Any

PARENT_POLL_S = 0.5


def _channel() -> IO[str]:
    chan = os.fdopen(os.dup(1), "w", buffering=1)
    os.dup2(2, 1)
    return chan


def _watch_parent(parent: int) -> None:
    def watch() -> None:
        while os.getppid() == parent:
            time.sleep(PARENT_POLL_S)
        os._exit(1)  # the sandbox's own watch then ends whatever it was running

    threading.Thread(target=watch, daemon=True).start()


def main() -> int:
    chan = _channel()
    _watch_parent(os.getppid())
    from autokernel.eval_job import Job, run_job, scrub_environment

    scrub_environment()
    lock = threading.Lock()

    def send(message: dict[str, Any]) -> None:
        with lock:
            chan.write(json.dumps(message) + "\n")
            chan.flush()

    import autokernel.harness.sandbox  # noqa: F401  (torch and the harness: before "started")

    send({"started": os.getpid()})
    for line in sys.stdin:
        if not line.strip():
            continue
        try:
            job = Job.from_json(json.loads(line))
            result = run_job(job, on_phase=lambda p: send({"phase": p}))
        except Exception:  # ours, not the candidate's: the driver re-queues the job
            send({"error": traceback.format_exc(limit=8)})
            continue
        send({"result": result})
    return 0


if __name__ == "__main__":
    sys.exit(main())
