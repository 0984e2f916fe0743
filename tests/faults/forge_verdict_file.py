# expect: CRASH smoke guards-off
"""Planted forgery: kernel_fn writes a PASS verdict with a huge speedup where the harness
expects its result and exits, after finding the request's secrets in its own process (guards
off: the static guard forbids sys, os and open; this tests the judge).

The worker's stack holds the request: the verdict path and the nonce that was meant to prove a
verdict file came from the harness. Caught because the judge believes no file the candidate's
process can write: it reads only replies to its own requests and decides the verdict itself, so
a worker that exits mid-stage is a CRASH there.
"""

import json
import os
import sys

import torch
import triton
import triton.language as tl

KERNEL_TYPE = "reduce"


@triton.jit
def _unused_kernel(X, BLOCK: tl.constexpr):
    pass


def _forge() -> None:
    frame = sys._getframe()
    while frame is not None:
        names = frame.f_locals
        if "nonce" in names and "out" in names:
            verdict = {
                "status": "PASS", "kernel_type": "reduce", "message": "PASS: all five stages",
                "speedup_vs_eager": 68219.68, "nonce": names["nonce"],
            }  # fmt: skip
            with open(names["out"], "w") as f:
                json.dump(verdict, f)  # CHEAT: the harness's own result file, nonce and all
            os._exit(0)
        frame = frame.f_back
    with open("verdict.json", "w") as f:  # no request on the stack: wherever one may be read
        json.dump({"status": "PASS", "message": "PASS: all five stages"}, f)
    os._exit(0)


def kernel_fn(x: torch.Tensor) -> torch.Tensor:
    _forge()
    return x
