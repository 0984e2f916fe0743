# expect: REJECTED smoke guards-off
"""Planted attack on the judge: a reply to the judge's own request, with the right sequence
number, whose status is a list (guards off: the static guard forbids sys and os; this tests the
judge against a worker that writes its own replies).

The request's seq and the reply channel are found in the worker's frames. The judge looked the
status up in a dict, and an unhashable one raised TypeError in the `autokernel` process itself:
the run died with a traceback. A reply of any shape the judge does not expect must end the
evaluation, never the judge. The worker then waits, so it is alive with an unreadable reply:
REJECTED in smoke.
"""

import json
import os
import sys
import time

import torch

KERNEL_TYPE = "reduce"


def _reply(message: dict) -> None:
    frame = sys._getframe()
    while frame is not None and "channel" not in frame.f_locals:
        frame = frame.f_back
    if frame is None:
        raise RuntimeError("no reply channel in the worker's frames")
    seq = frame.f_locals["msg"]["seq"]
    channel = frame.f_locals["channel"]
    channel.write(json.dumps({**message, "seq": seq}).encode() + b"\n")
    channel.flush()


def kernel_fn(x: torch.Tensor) -> torch.Tensor:
    _reply({"status": ["CRASH"], "message": "unhashable"})
    time.sleep(600)
    os._exit(0)
