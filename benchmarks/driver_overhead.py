"""What does the one writer cost per experiment? The parallel loop driven by slots that answer
at once with a made-up PASS verdict, so every second measured is the driver's own: the tuner's
proposal, the saved proposal and state, the commit, the keep decision, the results row, the
revert and its attempt ref. Its inverse is the most experiments per hour one driver can write,
however many GPUs evaluate. Runs on any machine (no GPU, no Triton kernel is run).

    python -m benchmarks.driver_overhead --experiments 120 --slots 1,8,64
"""

from __future__ import annotations

import argparse
import queue
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

from autokernel.agents.tuner import Tuner, read_config  # noqa: E402
from autokernel.eval_job import Job  # noqa: E402
from autokernel.harness.verdict import Status, Timing, Verdict  # noqa: E402
from autokernel.loop import Settings  # noqa: E402
from autokernel.orchestrate import Rules  # noqa: E402
from autokernel.parallel import ParallelLoop  # noqa: E402
from autokernel.pool import DONE, Event  # noqa: E402
from autokernel.run.results import ResultsLog  # noqa: E402
from autokernel.run.state import new_state  # noqa: E402
from autokernel.run.workspace import Workspace  # noqa: E402
from autokernel.targets import single  # noqa: E402
from benchmarks import runner  # noqa: E402


def _us(config: dict) -> float:
    """A made-up speed: larger blocks faster, other knobs cost a little (most configs lose)."""
    us = 100.0 * 4096 / config.get("BLOCK_SIZE", 4096)
    return us * (1.0 + 0.05 * sum(isinstance(v, str) for v in config.values()))


class InstantPool:
    """Slots whose every job is done the moment it is submitted."""

    on_gpu = True

    def __init__(self, slots: int) -> None:
        self.slots = [f"s{i}" for i in range(slots)]
        self._events: queue.Queue[Event] = queue.Queue()

    def where(self, slot: str) -> str:
        return "instant"

    def submit(self, slot: str, job: Job, deadline_s: float) -> None:
        us = _us(read_config(job.sources[-1])[0])
        if job.kind == "compare":
            best = _us(read_config(job.sources[0])[0])
            result = {"comparison": {"ratio": best / us, "noise": 0.005}}
        else:
            t = Timing(size="64x1024", dtype="float32", us=us, spread_us=0.01 * us,
                       eager_us=60.0, compile_us=None, throughput=1e3 / us, unit="GB/s",
                       pct_peak=10.0, speedup_vs_eager=60.0 / us, speedup_vs_compile=None)  # fmt: skip
            v = Verdict(status=Status.PASS, kernel_type="softmax", message="PASS", timings=[t])
            result = {"verdict": v.to_json()}
        self._events.put(Event(slot, job.key, DONE, result=result))

    def wait(self, timeout_s: float) -> list[Event]:
        out = []
        while not self._events.empty():
            out.append(self._events.get_nowait())
        return out

    def close(self) -> None:
        pass


def measure(slots: int, experiments: int) -> tuple[int, float]:
    with tempfile.TemporaryDirectory(prefix="ak-driver-") as d:
        root = Path(d)
        ws = Workspace.open(root)
        state = new_state("bench", "tuner", 10.0, [single("softmax")])
        settings = Settings(on_gpu=True, max_experiments=experiments,
                            rules=Rules(max_reverts=10**6))  # fmt: skip
        loop = ParallelLoop(ws, state, Tuner(), ResultsLog(root / "results.tsv"), settings,
                            pool=InstantPool(slots))  # fmt: skip
        t0 = time.perf_counter()
        loop.begin()
        loop.run()
        seconds = time.perf_counter() - t0
        return len(ResultsLog(root / "results.tsv").read()), seconds


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--experiments", type=int, default=120)
    ap.add_argument("--slots", default="1,8,64")
    args = runner.add_arguments(ap).parse_args()
    git = subprocess.run(["git", "--version"], capture_output=True, text=True).stdout.strip()
    print(f"{git}; python {sys.version.split()[0]}")
    rows = []
    for n in (int(x) for x in args.slots.split(",")):
        count, seconds = measure(n, args.experiments)
        ms = 1000.0 * seconds / count
        rows.append({"slots": n, "experiments": count, "driver s": round(seconds, 1),
                     "ms per experiment": round(ms), "ceiling exp/h": round(3.6e6 / ms)})  # fmt: skip
        print(f"{n} slot(s): {ms:.0f} ms per experiment", flush=True)
    markdown = f"{git}; python {sys.version.split()[0]}\n\n{runner.table(rows)}"
    runner.record("driver_overhead", rows, markdown, commit=args.commit, results=args.results)
    print(markdown)
    return 0


if __name__ == "__main__":
    sys.exit(main())
