"""The baselines and ceilings every speedup is measured against: measured by a worker that never
imports candidate code, kept where no worker can reach.

Why a worker of its own: a candidate's worker reads only the trusted cache and writes only its
own folder (cache_tiers.py), yet whatever it reports is still said by a process that ran
candidate code. Eager and torch.compile timings, the copy ceiling and the matmul peak decide
speedups, % of peak and two of the move-on rules, so they come from the baseline worker: a
contained worker started with trusted=True, sent the evaluation's request in the "baselines"
mode, asked to finish, and closed; it refuses any import. Its reply is stored in the user's
cache (cache_dir()/trusted-baselines.json, never mounted into a worker) under a key of
everything that shapes it, so it runs once per machine, kernel type and benchmark setting: the
first evaluation of a night pays one extra worker start.
"""

from __future__ import annotations

import json
import os
import secrets
from collections.abc import Callable
from importlib import metadata
from typing import Any

import torch

from autokernel import __version__
from autokernel.cache import cache_dir, read_json, write_json_atomic
from autokernel.harness.cache_tiers import trusted_root
from autokernel.harness.channel import ChannelError, ChannelTimeout
from autokernel.harness.judge import Link
from autokernel.harness.prestart import Worker
from autokernel.harness.worker import BASELINES

STORE = "trusted-baselines.json"
STAMP = "stamp"  # in the trusted cache: a new one after a wipe makes every entry stale
_failed: set[str] = set()  # keys whose baseline worker failed in this process: not retried


def _version(package: str) -> str:
    try:
        return metadata.version(package)
    except metadata.PackageNotFoundError:
        return "?"


def request_key(req: dict[str, Any]) -> str:
    """Everything that changes the baseline worker's reply: the kernel type and benchmark
    settings of the request, the device seen (which GPUs are visible), the library versions."""
    on_gpu = torch.cuda.is_available() and not req.get("force_cpu")
    fields = (
        req["kernel_type"], req.get("dtype") or "", bool(req.get("quick")),
        json.dumps(req.get("extra_sizes") or []), bool(req.get("compile_baseline", True)),
        json.dumps(req.get("region"), sort_keys=True),  # a generic target's reference
        "cuda" if on_gpu else "cpu", os.environ.get("CUDA_VISIBLE_DEVICES", ""),
        f"torch {torch.__version__}", f"triton {_version('triton')}",
        f"autokernel {__version__}",  # the package's own: its distribution is torch-autokernel
    )  # fmt: skip
    return "|".join(str(f) for f in fields)


def _stamp() -> str:
    """The trusted cache's identity: entries measured before it was wiped are stale, since the
    candidate workers would then find no warm imports or compiled baselines there."""
    path = trusted_root() / STAMP
    try:
        return path.read_text().strip()
    except OSError:
        value = secrets.token_hex(8)
        path.write_text(value)
        return value


def lookup(key: str) -> dict[str, Any] | None:
    """The stored reply for this key, if measured against the current trusted cache."""
    entry = read_json(cache_dir() / STORE).get(key)
    if not isinstance(entry, dict) or entry.get(STAMP) != _stamp():
        return None
    reply = entry.get("reply")
    return reply if isinstance(reply, dict) else None


def store(key: str, reply: dict[str, Any]) -> None:
    path = cache_dir() / STORE
    data = read_json(path)  # another run may have written meanwhile
    data[key] = {STAMP: _stamp(), "reply": reply}
    write_json_atomic(path, data)


def prepared(
    req: dict[str, Any],
    env: dict[str, str],
    limit_s: float,
    on_phase: Callable[[str], None],
) -> dict[str, Any]:
    """The trusted first reply for this request: stored, else measured now. {} when the
    request times nothing. A baseline worker that fails or runs out of time costs the speedups,
    never the evaluation: its reason comes back as a note."""
    if not req.get("timing", True) or req.get("mode") == "compare":
        return {}
    key = request_key(req)
    found = lookup(key)
    if found is not None:
        return found
    if key in _failed:
        return {"notes": ["baselines unavailable: the baseline worker failed earlier"]}
    worker = Worker.start(bool(req.get("force_cpu")), env, trusted=True)
    try:
        link = Link(worker, (limit_s, limit_s), on_phase, lambda: None)
        reply = link.first({**req, "mode": BASELINES})
        link.request({"op": "finish"})
    except (ChannelError, ChannelTimeout) as exc:
        _failed.add(key)
        why = str(exc) or type(exc).__name__
        return {"notes": [f"baselines unavailable: the baseline worker failed ({why})"]}
    finally:
        worker.close()
    store(key, reply)
    return reply
