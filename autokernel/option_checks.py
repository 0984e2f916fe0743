"""Command-line values checked before anything starts: one line saying what to pass instead.

Typer converts types but accepts `--hours nan`, `--max-experiments 0` or `--timeout -5`; left
alone they give a run that stops at once, never stops, or kills every evaluation, and a bad
`--json` path fails only after minutes of evaluation. Each function returns the message of
the first bad value, or None.
"""

from __future__ import annotations

import math
import os
import re
from pathlib import Path


def _positive(flag: str, value: float | None) -> str | None:
    if value is not None and not (math.isfinite(value) and value > 0):
        return f"{flag} must be a positive number, got {value:g}"
    return None


def _at_least_one(flag: str, value: int | None) -> str | None:
    if value is not None and value < 1:
        return f"{flag} must be 1 or more, got {value}"
    return None


def _directory(flag: str, path: Path) -> str | None:
    if path.exists() and not path.is_dir():
        return f"{flag} {path} is a file: give a directory"
    return None


# A tag names the branch autokernel/<tag>: what git's ref rules allow, checked without a repository
# so that a bad tag is refused before the workspace gets one.
_TAG = re.compile(r"[A-Za-z0-9_][A-Za-z0-9._-]*")


def _tag(tag: str | None) -> str | None:
    if tag is None:
        return None
    if not _TAG.fullmatch(tag) or ".." in tag or tag.endswith((".", ".lock")):
        return f"invalid --tag {tag!r}: use letters, digits, '-', '_' or '.'"
    return None


def run_error(
    hours: float | None,
    max_experiments: int | None,
    max_tokens: int | None,
    timeout: float | None,
    workspace: Path,
    plan: Path | None,
    workers: int | None = None,
    ray_address: str | None = None,
    tag: str | None = None,
    resume_and_new: bool = False,
) -> str | None:
    """The first bad `autokernel run` option, or None."""
    problems = (
        "--resume continues the workspace's run and --new starts another: pass one of them"
        if resume_and_new
        else None,
        _tag(tag),
        _positive("--hours", hours),
        _at_least_one("--max-experiments", max_experiments),
        _at_least_one("--max-tokens", max_tokens),
        _positive("--timeout", timeout),
        _directory("--workspace", workspace),
        _plan_file(plan),
        _at_least_one("--workers", workers),
        None
        if ray_address is None or ray_address.strip()
        else "--ray-address is empty: give auto, HOST:PORT or ray://HOST:PORT",
    )
    return next((p for p in problems if p), None)


def _plan_file(plan: Path | None) -> str | None:
    if plan is None or plan.is_file():
        return None
    if plan.is_dir():
        return f"--plan {plan} is a directory: give the plan file (profile writes plan.yaml)"
    return f"--plan {plan}: no such file"


def bench_error(timeout: float, json_out: Path | None) -> str | None:
    """The first bad `autokernel bench` option, or None; the --json path is checked for
    writing now, not after the evaluation."""
    problem = _positive("--timeout", timeout)
    if problem or json_out is None:
        return problem
    parent = json_out.parent if str(json_out.parent) else Path(".")
    if json_out.is_dir():
        return f"--json {json_out} is a directory: give a file name"
    if not parent.is_dir():
        return f"--json {json_out}: the directory {parent} does not exist"
    target = json_out if json_out.exists() else parent
    if not os.access(target, os.W_OK):
        return f"--json {json_out}: cannot write there; pick another path"
    return None


def status_error(workspace: Path) -> str | None:
    """A bad `autokernel status` option, or None."""
    return _directory("--workspace", workspace)


def backend_error(file: Path) -> str | None:
    """A BACKEND = "cuda" file on a machine without a GPU: nothing could build or run it."""
    import torch

    from autokernel.backends import of_source
    from autokernel.harness.sandbox import NO_GPU

    try:
        source = file.read_text()
    except (OSError, UnicodeDecodeError):
        return None  # evaluate() says what is wrong with the file
    if of_source(source) == "cuda" and not torch.cuda.is_available():
        return f"{file}: {NO_GPU}"
    return None
