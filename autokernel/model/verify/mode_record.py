"""optimized/modes.json: which kernels helped the whole model in which mode, as verify measured.

One writer (verify, after its kernel selection ran on a GPU); readers: `use_kernels` plugs in
only the kernels that helped in the requested mode, and the prediction reuses the measured
per-target effects. Shape:

    {"eager": {"kept": ["rmsnorm"], "dropped": {"softmax": "why"},
               "effects": {"rmsnorm": {"ratio": 1.08, "noise": 0.01, ...}, "softmax": ...},
               "kept_effects": {"rmsnorm": {"ratio": 1.12, ...}},
               "model": "...", "device": "...", "patched_ms": 3.1, "base_ms": 3.4},
     "compile": {...}}
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from autokernel.atomic import write_atomic
from autokernel.run import layout

RECORD = layout.MODES


class RecordError(Exception):
    """modes.json exists but cannot be read."""


def read(workspace: Path) -> dict[str, Any]:
    """The record, {} when there is none."""
    path = Path(workspace) / RECORD
    if not path.is_file():
        return {}
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError) as exc:
        raise RecordError(f"{path}: unreadable ({exc}); delete it and run verify again") from None
    return data if isinstance(data, dict) else {}


def kept(workspace: Path, mode: str) -> list[str] | None:
    """The targets that helped in `mode`, or None when verify never decided for that mode."""
    entry = read(workspace).get(mode)
    return list(entry["kept"]) if isinstance(entry, dict) and "kept" in entry else None


def effects(workspace: Path, mode: str) -> dict[str, float]:
    """Measured whole-model ratio per target in `mode` (forward without it / with it)."""
    return ratios(read(workspace).get(mode) or {})


def ratios(entry: dict[str, Any]) -> dict[str, float]:
    """Ratio per target of a selection or record entry: measured with the kept set
    ("kept_effects", the user's configuration) where the entry has it, else with every
    candidate in ("effects"; records written before kept_effects existed)."""
    chosen = entry.get("kept_effects") or entry.get("effects") or {}
    return {t: float(e["ratio"]) for t, e in chosen.items() if "ratio" in e}


def write(workspace: Path, mode: str, entry: dict[str, Any]) -> Path:
    """Replace `mode`'s entry, keeping the other modes'; written to a temporary file and renamed
    so a reader never sees half a file."""
    path = Path(workspace) / RECORD
    try:
        data = read(workspace)
    except RecordError:
        data = {}
    data[mode] = entry
    write_atomic(path, json.dumps(data, indent=2, sort_keys=True) + "\n")
    return path
