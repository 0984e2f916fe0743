"""The candidate's words made safe to show, write and send.

Everything a candidate's process says (an exception's message, its stderr, the notes of its
verdict) reaches the live view, run.log, results.tsv, the report and the next LLM prompt. Two
things must not travel with it: key values (secrets.py) and control characters. An escape
sequence printed to the user's terminal can clear the screen and draw a fake "keep" line,
retitle the window, or write the clipboard (OSC 52); Rich passes ESC through. So every C0 and
C1 control character but newline and tab is replaced, and so are the invisible bidirectional
overrides that make a line read other than it is.
"""

from __future__ import annotations

import re
from typing import Any

from autokernel.secrets import redact, redact_json

REPLACEMENT = "\ufffd"
_CONTROLS = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069]")


def printable(text: str) -> str:
    """text with every control character but newline and tab replaced, and keys redacted."""
    return redact(_CONTROLS.sub(REPLACEMENT, text)) if text else text


def printable_json(data: Any) -> Any:
    """A JSON-able value with every string in it (keys too) made printable: a verdict's fields
    are written by many writers and quoted in the next prompt."""
    return redact_json(_strip(data))


def _strip(data: Any) -> Any:
    if isinstance(data, str):
        return _CONTROLS.sub(REPLACEMENT, data)
    if isinstance(data, dict):
        return {_strip(str(k)): _strip(v) for k, v in data.items()}
    if isinstance(data, list | tuple):
        return [_strip(v) for v in data]
    return data
