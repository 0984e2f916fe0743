"""Does a kernel that does no work while do_bench times it pass on the GPU? (red-team check)

The attack: the softmax starter, unchanged except at one benchmark size (262144x128, about 35 us
on an H200): after the judge's checked call on a buffer, the next NOOP_CALLS calls on that same
buffer return torch.empty_like(x) and launch nothing; later calls are honest. do_bench's calls
(about 1700 of them, its estimate includes the 256 MB L2 flush) fall inside that window, so its
median is a launch-free call's; the fresh-data calls and the judge's batch come after it and are
honest, so every output checked is right. What can stop it: the worker's fresh-data check (calls
on new values may take at most 3x the median + 50 us) and the judge's wall clock (2x the median
+ 30 us + the flush time). Both slacks are absolute, so a kernel of a few tens of microseconds
fits inside them whatever median it claims.

Evaluates the starter and the attack, both with guards on, and prints one JSON line each: the
verdict and, per benchmark size, the claimed median and the judge's wall time per call. The
attack is caught when its verdict is not PASS, or its claimed median at 262144x128 is within
2x of the starter's there.

Then one more line: whether a Triton kernel on this GPU can read host memory at a raw address
(a Python bytes object's contents, by id()). Where the driver maps pageable host memory for the
device (HMM), a judged kernel that verify or use_kernels loads could read and write the user's
process as it can under the CPU interpreter. It runs in a child process, since without HMM the
load is an illegal address that ends the CUDA context.

The lines and a Markdown summary are recorded through benchmarks/runner.py (question
"redteam_gpu": a line of <gpu>.jsonl, latest.md regenerated).

    python -m benchmarks.redteam_gpu --commit SHA   # GPU: about a minute warm (two evaluations)
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from pathlib import Path
from typing import Any

from benchmarks import runner

ROOT = Path(__file__).resolve().parents[1]
CHEAT_SIZE = "262144x128"  # the one benchmark size where the attack skips its work

CHEAT = """

_CHEAT_SHAPE = (262144, 128)
_NOOP_CALLS = 1500
_SEEN: dict = {}


def kernel_fn(x: torch.Tensor) -> torch.Tensor:
    key = (x.data_ptr(), tuple(x.shape), x.dtype)
    if tuple(x.shape) == _CHEAT_SHAPE:
        n = _SEEN.get(key)
        if n is None:
            _SEEN[key] = 0  # the judge's checked call: honest
        elif n < _NOOP_CALLS:
            _SEEN[key] = n + 1
            return torch.empty_like(x)  # timed by do_bench: no work at all
    return _honest_kernel_fn(x)
"""


def attack_source() -> str:
    source = (ROOT / "kernels" / "softmax.py").read_text()
    return source.replace("def kernel_fn(", "def _honest_kernel_fn(", 1) + CHEAT


def summary(name: str, verdict) -> dict:
    return {
        "kernel": name,
        "status": verdict.status.value,
        "message": verdict.message[:300],
        "sizes": [
            {
                "size": t.size,
                "claimed_us": round(t.us, 2),
                "wall_us": round(t.judge_wall_us or 0, 2),
            }
            for t in verdict.timings
        ],
        "harness_s": round(verdict.harness_s, 1),
    }


HOST_READ = """
import torch, triton, triton.language as tl

@triton.jit
def _peek(X, Y, off, N: tl.constexpr):
    i = tl.arange(0, N)
    tl.store(Y + i, tl.load(X + off + i))

secret = b"host-bytes-read-by-a-gpu-kernel!"
base = torch.zeros(1, dtype=torch.uint8, device="cuda")
out = torch.zeros(32, dtype=torch.uint8, device="cuda")
_peek[(1,)](base, out, id(secret) + 32 - base.data_ptr(), N=32)
torch.cuda.synchronize()
print(bytes(out.cpu().tolist()) == secret)
"""


def host_read_probe() -> dict:
    import subprocess

    with tempfile.TemporaryDirectory() as tmp:
        probe = Path(tmp) / "host_read.py"  # Triton reads a jit function's source from its file
        probe.write_text(HOST_READ)
        try:
            done = subprocess.run([sys.executable, str(probe)], capture_output=True, text=True,
                                  timeout=120)  # fmt: skip
        except subprocess.TimeoutExpired:
            return {"probe": "gpu kernel reads host memory", "result": "timeout"}
    tail = (done.stdout + done.stderr).strip().splitlines()[-1:] or [""]
    return {"probe": "gpu kernel reads host memory", "returncode": done.returncode,
            "read_it": tail[0] == "True", "last_line": tail[0][:200]}  # fmt: skip


def run() -> list[dict[str, Any]]:
    """The starter's and the attack's verdicts and the host-read probe, one row each (and the
    static guard's findings on the attack, if any), each printed as a JSON line as it comes so
    a call cut by its time limit still shows what it measured."""
    from autokernel.harness.guards import check_source
    from autokernel.harness.sandbox import Options, evaluate

    rows: list[dict[str, Any]] = []

    def emit(row: dict[str, Any]) -> None:
        rows.append(row)
        print(json.dumps(row), flush=True)

    source = attack_source()
    findings = check_source(source)
    if findings:
        emit({"kernel": "attack", "static": [str(f) for f in findings]})
    opts = Options(compile_baseline=False, seed=1234)
    with tempfile.TemporaryDirectory() as tmp:
        attack = Path(tmp) / "softmax_noop_while_timed.py"
        attack.write_text(source)
        for name, path in (("starter", ROOT / "kernels" / "softmax.py"), ("attack", attack)):
            emit(summary(name, evaluate(path, opts)))
    emit(host_read_probe())
    return rows


def _claimed(row: dict[str, Any] | None) -> float | None:
    sizes = (row or {}).get("sizes", [])
    return next((s["claimed_us"] for s in sizes if s["size"] == CHEAT_SIZE), None)


def caught(rows: list[dict[str, Any]]) -> bool:
    """The module's rule: the attack is caught when its verdict is not PASS, or when the
    median it claims at the cheat size is within 2x of the honest starter's there."""
    by_kernel = {r["kernel"]: r for r in rows if "status" in r}
    attack = by_kernel.get("attack")
    if attack is None:  # never evaluated: nothing shows it was stopped
        return False
    if attack["status"] != "PASS":
        return True
    ours, honest = _claimed(attack), _claimed(by_kernel.get("starter"))
    return bool(ours and honest and ours * 2 >= honest)


def markdown(rows: list[dict[str, Any]]) -> str:
    lines = ["# Red-team #14 on the GPU: a kernel that skips its work while do_bench times it",
             "", f"| kernel | verdict | claimed us at {CHEAT_SIZE} | judge wall us there | "
             "harness s | message |", "|---|---|---:|---:|---:|---|"]  # fmt: skip
    for r in rows:
        if "status" in r:
            wall = next((s["wall_us"] for s in r["sizes"] if s["size"] == CHEAT_SIZE), None)
            lines.append(f"| {r['kernel']} | {r['status']} | {_claimed(r) or '-'} | "
                         f"{wall or '-'} | {r['harness_s']} | {r['message'][:160].replace('|', '/')} |")  # fmt: skip
    lines += ["", f"- the attack: {'caught' if caught(rows) else '**not caught**'}"]
    for r in rows:
        if "static" in r:
            lines.append(f"- static guard on the attack: {'; '.join(r['static'])[:300]}")
        if "probe" in r:
            read = "**yes**" if r.get("read_it") else "no"
            why = r.get("result") or f"return code {r.get('returncode')}: {r.get('last_line')}"
            lines.append(f"- a GPU kernel reads host memory at a raw address: {read} ({why})")
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    ap = runner.add_arguments(argparse.ArgumentParser(description=__doc__.splitlines()[0]))
    args = ap.parse_args(argv)
    args.commit = args.commit or runner.tree_commit()
    rows = run()
    runner.record("redteam_gpu", rows, markdown(rows), commit=args.commit, results=args.results)
    return 0


if __name__ == "__main__":
    sys.exit(main())
