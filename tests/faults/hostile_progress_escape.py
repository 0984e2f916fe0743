# expect: CRASH smoke guards-off
"""Planted attack: write terminal escape sequences to the user's screen through the phase
that the judge shows while it waits (guards off: the static guard forbids os; this tests the
harness).

The judge polls the worker's `progress` file and hands the phase it finds to the live view and
to `autokernel bench`'s status line. Every other word of the candidate's process is made
printable first (untrusted_text.py), but the phase went out as read: an OSC 52 sequence there
writes the user's clipboard, and ESC[2J plus a drawn line can fake a "keep" on the screen. The
phase is made printable like the rest (tests/test_faults.py checks every phase it is shown);
the kernel then raises: CRASH in smoke.
"""

import time

import torch

KERNEL_TYPE = "reduce"
PAYLOAD = "\x1b]52;c;ZWNobyBwd25lZA==\x07\x1b[2J\x1b[Hexp 9 [reduce] keep \u202e"


def kernel_fn(x: torch.Tensor) -> torch.Tensor:
    with open("progress", "w") as f:  # the worker runs in its own directory
        f.write(PAYLOAD)
    time.sleep(1.0)  # the judge reads the file while it waits for this call's reply
    raise RuntimeError("done")
