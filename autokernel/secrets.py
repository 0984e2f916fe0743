"""Keep key values out of every text we write or send: verdicts, run.log, terminal lines,
results.tsv, commit messages and the prompts sent to an LLM.

A candidate that gets hold of a key (or an SDK that quotes one in an error) must not be able to
carry it into a file or the next prompt. Values come from register_secret (keys read from
config files) and from every environment variable whose name says it holds a credential, read
at each call so a key exported later is covered too. A whole value is replaced, and so is any
run of FRAGMENT_CHARS or more of its characters (a key printed from its 5th character on).
"""

from __future__ import annotations

import json
import os
import re
from typing import Any

MIN_SECRET_CHARS = 8  # shorter values (placeholders, "true") would redact ordinary words
FRAGMENT_CHARS = 16  # runs this long of a key are redacted too; shorter ones match by chance
MASK = "[redacted]"
# OPENAI_API_KEY, HF_TOKEN, AWS_SECRET_ACCESS_KEY; not TOKENIZERS_PARALLELISM
SECRET_NAME = re.compile(r"(KEY|TOKEN|SECRET|PASSWORD|CREDENTIAL)S?(_|$)", re.IGNORECASE)

_registered: set[str] = set()


def register_secret(value: object) -> None:
    """Redact this value (a key read from a file or the command line) from now on."""
    if isinstance(value, str) and len(value.strip()) >= MIN_SECRET_CHARS:
        _registered.add(value.strip())


def secret_values() -> list[str]:
    """Every value to redact, longest first (a key that contains another is masked whole)."""
    env = {
        v.strip() for k, v in os.environ.items()
        if SECRET_NAME.search(k) and len(v.strip()) >= MIN_SECRET_CHARS
    }  # fmt: skip
    return sorted(_registered | env, key=len, reverse=True)


def redact(text: str) -> str:
    """The text with every secret value, and every long enough run of one, replaced by MASK."""
    if not text:
        return text
    for secret in secret_values():
        if secret in text:
            text = text.replace(secret, MASK)
        if len(secret) >= FRAGMENT_CHARS + MIN_SECRET_CHARS:
            text = _mask_fragments(text, secret)
    return text


def redact_json(data: Any) -> Any:
    """A JSON-able value with every string in it redacted (keys raised by a candidate reach
    verdict fields that many writers and the next prompt read)."""
    return json.loads(redact(json.dumps(data, allow_nan=True)))


def _mask_fragments(text: str, secret: str) -> str:
    """Mask each maximal stretch of text covered by FRAGMENT_CHARS-long windows of the secret
    (any run of the secret at least that long is covered by such windows)."""
    covered = bytearray(len(text))
    found = False
    for j in range(len(secret) - FRAGMENT_CHARS + 1):
        window = secret[j : j + FRAGMENT_CHARS]
        i = text.find(window)
        while i != -1:
            covered[i : i + FRAGMENT_CHARS] = b"\1" * FRAGMENT_CHARS
            found = True
            i = text.find(window, i + 1)
    if not found:
        return text
    out, i = [], 0
    while i < len(text):
        if covered[i]:
            while i < len(text) and covered[i]:
                i += 1
            out.append(MASK)
        else:
            start = i
            while i < len(text) and not covered[i]:
                i += 1
            out.append(text[start:i])
    return "".join(out)
