"""Every path of a run directory, relative to the workspace (the user's folder) — the one
place that spells them, so that the run, the report, verify and the API agree on where
things are, and a rename is one edit.

    plan.yaml                    the targets, written by `autokernel profile`
    kernel.py                    the kernel under work, the only tracked file a run commits
    results.tsv                  one row per experiment (untracked: survives reverts)
    progress.png                 the report's plot (untracked)
    optimized/<target>.py        each target's best kernel, committed when it is done
    optimized/modes.json         which kernels helped the model in which mode (verify)
    .autokernel/                 the run's scratch folder (untracked)
        state.json  heartbeat.json  run.log  run.lock  workers.jsonl  best_kernel.py
        verdicts/<n>.json  pending/<n>.py  workers/  verify/<target>.py
"""

from __future__ import annotations

from pathlib import Path

PLAN = Path("plan.yaml")
KERNEL = Path("kernel.py")
RESULTS = Path("results.tsv")
PROGRESS_PNG = Path("progress.png")
OPTIMIZED = Path("optimized")
MODES = OPTIMIZED / "modes.json"

SCRATCH = Path(".autokernel")
STATE_FILE = SCRATCH / "state.json"
HEARTBEAT = SCRATCH / "heartbeat.json"  # the night's time spent, between state saves
RUN_LOG = SCRATCH / "run.log"
RUN_LOCK = SCRATCH / "run.lock"
WORKERS_LOG = SCRATCH / "workers.jsonl"
BEST_KERNEL = SCRATCH / "best_kernel.py"  # the best kernel, beside kernel.py, to compare with
VERDICTS = SCRATCH / "verdicts"
PENDING = SCRATCH / "pending"  # parallel proposals numbered but not yet committed
WORKERS = SCRATCH / "workers"  # the local parallel slots' folders
VERIFY = SCRATCH / "verify"  # best-commit kernels written out for verify to load by path

# Untracked by design: rows and state must survive reverts and never show up as user changes
# (the run writes these lines to .git/info/exclude).
EXCLUDED = (f"/{RESULTS}", f"/{SCRATCH}/", f"/{PROGRESS_PNG}")


def optimized(target: str) -> Path:
    """A finished target's kernel file (the target's name is checked by targets.TARGET_NAME)."""
    return OPTIMIZED / f"{target}.py"


def verdict(experiment: int) -> Path:
    """Experiment n's saved verdict, read back at resume so a kill never loses a decision."""
    return VERDICTS / f"{experiment}.json"


def pending(experiment: int) -> Path:
    """A parallel proposal saved before it is committed, so a resume writes it in its turn."""
    return PENDING / f"{experiment}.py"
