"""One evaluation as a self-contained job, so that it can run away from the workspace: in a
local worker process (eval_worker.py) or a Ray actor on another node (ray_pool.py).

A job carries the kernel sources themselves, not paths: a Ray node does not see the workspace.
Whoever runs it writes them into a private folder and calls the same sandboxed evaluation as
the sequential loop (harness.sandbox.evaluate, or sandbox.compare for an interleaved
re-measurement), so the judge stays in that trusted process and the candidate in its bwrap
worker, exactly as on one GPU. Jobs and results cross process boundaries as JSON only.
"""

from __future__ import annotations

import dataclasses
import hashlib
import os
import tempfile
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

EVALUATE = "evaluate"
COMPARE = "compare"  # sources: [best, candidate], timed interleaved in one worker
NAMES = {EVALUATE: ("kernel.py",), COMPARE: ("best_kernel.py", "kernel.py")}


@dataclass
class Job:
    """What a worker needs; `key` names it for the driver (an experiment, a calibration)."""

    key: str
    kind: str  # EVALUATE or COMPARE
    sources: list[str]
    options: dict[str, Any] = field(default_factory=dict)  # sandbox.Options as a dict

    def to_json(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Job:
        return cls(**data)


def options_dict(opts: object) -> dict[str, Any]:
    """sandbox.Options as plain JSON values (extra sizes are dicts of ints already)."""
    assert dataclasses.is_dataclass(opts) and not isinstance(opts, type)
    return dataclasses.asdict(opts)


def scrub_environment() -> None:
    """Drop credentials from this process's environment: a worker process or Ray actor needs
    none, and a Ray cluster started by the driver inherits the driver's keys."""
    from autokernel.harness.worker_env import SECRET_ENV

    for name in [k for k in os.environ if SECRET_ENV.search(k)]:
        del os.environ[name]


def code_fingerprint(root: Path | None = None) -> str:
    """A digest of the autokernel sources this process imports (`root`: that package folder,
    starters and references included): the judge that runs a job must be the driver's own. A
    Ray node with another install would otherwise judge with other stages and tolerances, or
    fail on a field it does not know, and nothing would say why. About 150 files: 5 ms."""
    root = root or Path(__file__).resolve().parent
    digest = hashlib.sha256()
    for path in sorted(root.rglob("*")):
        if path.suffix in (".py", ".md") and "__pycache__" not in path.parts and path.is_file():
            digest.update(path.relative_to(root).as_posix().encode() + b"\0")
            digest.update(path.read_bytes() + b"\0")
    return digest.hexdigest()[:16]


def run_job(job: Job, on_phase: Callable[[str], None] | None = None) -> dict[str, Any]:
    """Run the job here and return {"verdict": ...} or {"comparison": ...} as JSON values.

    Never raises for the candidate's faults (the sandbox turns them into verdicts); an
    exception from here is a fault of this worker, which the driver treats as a lost one."""
    from autokernel.harness import sandbox
    from autokernel.run.rows import PARSE_ERRORS, unparsable

    if job.kind not in NAMES or len(job.sources) != len(NAMES[job.kind]):
        raise ValueError(f"malformed job {job.key!r}: {job.kind} with {len(job.sources)} files")
    opts = sandbox.Options(**job.options)
    with tempfile.TemporaryDirectory(prefix="autokernel-job-") as folder:
        paths = [Path(folder) / name for name in NAMES[job.kind]]
        for path, source in zip(paths, job.sources, strict=True):
            path.write_bytes(source.encode("utf-8"))  # byte for byte: the verdict's sha256
        if job.kind == COMPARE:
            cmp = sandbox.compare(paths[0], paths[1], opts, on_phase=on_phase)
            return {"comparison": cmp.to_json()}
        try:
            verdict = sandbox.evaluate(paths[0], opts, on_phase=on_phase)
        except PARSE_ERRORS as exc:  # the file's content: a verdict, as in the loop
            verdict = unparsable(exc)
        return {"verdict": verdict.to_json()}
