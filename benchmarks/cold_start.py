"""Does the first timing on a GPU that was idle read slow? (Tuner runs on the H200 measured their
first evaluation 12-21 % slower than later re-measurements of the same kernel.)

In one process: time a kernel at its spec's GPU benchmark sizes three times in a row, then after
a GPU busy spell (a bf16 matmul loop), twice more. Prints one JSON object.

    python -m benchmarks.cold_start --type rmsnorm [--burn-s 1.0] [--commit SHA]
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

import torch  # noqa: E402

from autokernel.kernel_file import import_file  # noqa: E402
from autokernel.specs import SPECS  # noqa: E402
from autokernel.stats import geomean  # noqa: E402
from autokernel.timing import measure  # noqa: E402
from benchmarks import runner  # noqa: E402


def burn(seconds: float) -> int:
    a = torch.randn(4096, 4096, device="cuda", dtype=torch.bfloat16)
    n, start = 0, time.perf_counter()
    while time.perf_counter() - start < seconds:
        for _ in range(20):
            a @ a
        torch.cuda.synchronize()
        n += 20
    return n


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--type", default="rmsnorm")
    ap.add_argument("--burn-s", type=float, default=1.0)
    args = runner.add_arguments(ap).parse_args()
    args.commit = args.commit or runner.tree_commit()
    spec = SPECS[args.type]
    path = ROOT / "kernels" / f"{args.type}.py"
    module = import_file(path, "cold_kernel")
    gen = torch.Generator(device="cuda").manual_seed(0)
    cases = []
    for size in spec.sizes(True).bench:
        inputs = spec.make_inputs(size, torch.bfloat16, gen, torch.device("cuda"))
        module.kernel_fn(*inputs)  # compile outside the timings
        cases.append((spec.label(size), inputs))
    torch.cuda.synchronize()

    def one_round() -> dict:
        per = {label: measure(lambda i=inputs: module.kernel_fn(*i), True).median_us
               for label, inputs in cases}  # fmt: skip
        return {"per_size_us": per, "geomean_us": geomean(per.values())}

    rounds = [{"when": f"round {i + 1}, no burn", **one_round()} for i in range(3)]
    matmuls = burn(args.burn_s)
    for i in range(2):
        rounds.append(
            {"when": f"after a {args.burn_s:g} s matmul burn, round {i + 1}", **one_round()}
        )
    rows = [{"when": r["when"], "geomean_us": r["geomean_us"], **r["per_size_us"]} for r in rounds]
    runner.record("cold_start", rows, runner.table(rows), commit=args.commit,
                  results=args.results, extra={"type": args.type, "burn_matmuls": matmuls})  # fmt: skip
    print(json.dumps({
        "gpu": torch.cuda.get_device_name(), "torch": torch.__version__,
        "commit": args.commit, "type": args.type, "burn_matmuls": matmuls, "rounds": rounds,
    }, indent=1))  # fmt: skip


if __name__ == "__main__":
    main()
