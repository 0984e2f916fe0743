"""The PTX a Triton kernel inlines (tl.inline_asm_elementwise), read as the C++ guard reads asm.

Why at all: the asm is a string the Python guard would otherwise pass unread, and PTX can read
the device's clocks (%globaltimer, %clock64) and counters. With a clock a kernel tells the
worker's timed calls (spaced by do_bench's L2 flush) from the judge's checked ones (back to
back, guard_lists.PTX_CLOCK_REGISTER) and does its work only when checked. So the asm must be
a string literal, and it may not name a clock or counter register.
"""

from __future__ import annotations

import ast
import re

from autokernel.harness.guard_lists import PTX_CLOCK_REGISTER


def inline_asm_problem(call: ast.Call) -> str | None:
    """Why this inline_asm_elementwise call is refused; None if its asm may run."""
    asm = call.args[0] if call.args else next(
        (k.value for k in call.keywords if k.arg == "asm"), None
    )  # fmt: skip
    if not (isinstance(asm, ast.Constant) and isinstance(asm.value, str)):
        return "inline_asm_elementwise: the asm must be a string literal (the guard reads it)"
    clock = re.search(PTX_CLOCK_REGISTER, asm.value)
    if clock:
        return (f"inline_asm_elementwise reads {clock.group(0)}, a clock or counter register: "
                "a kernel may not time itself")  # fmt: skip
    return None
