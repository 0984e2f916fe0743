# expect: REJECTED smoke guards-off
"""Planted attack on the judge: a reply line of 100000 nested brackets on the worker's reply
channel (guards off: the static guard forbids sys and os; this tests the judge).

Python's JSON parser raises RecursionError on nesting that deep, not ValueError, and the judge
caught only ValueError: the `autokernel` process died with a traceback, ending the night. Any
line the judge cannot parse must end the evaluation, never the judge. The worker then waits, so
it is alive with an unreadable reply: REJECTED in smoke.
"""

import os
import sys
import time

import torch

KERNEL_TYPE = "reduce"


def _channel():
    frame = sys._getframe()
    while frame is not None and "channel" not in frame.f_locals:
        frame = frame.f_back
    if frame is None:
        raise RuntimeError("no reply channel in the worker's frames")
    return frame.f_locals["channel"]


def kernel_fn(x: torch.Tensor) -> torch.Tensor:
    channel = _channel()
    channel.write(b"[" * 100_000 + b"\n")
    channel.flush()
    time.sleep(600)
    os._exit(0)
