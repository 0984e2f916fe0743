"""What a compiled CUDA image (a cubin, an ELF file) keeps in device memory between launches.

Why: the determinism stage trusts that whatever a kernel replays it must hold in a tensor, which
it counts (harness/retention.py). A `__device__` or `__managed__` variable, or a `static` one in
a device function, is memory of the module itself: it outlives every call, no tensor holds it,
and a kernel could keep a table of earlier outputs there (keyed by its inputs) and replay them,
so that a racy reduction would read as deterministic. nvcc places all of them, initialized or
not and `const` or not, in the `.nv.global` and `.nv.global.init` sections; `__constant__`
(written only from the host, which a candidate has no code on) and `__shared__` (per block, gone
with it) live elsewhere. Read from the compiled image, so no macro or spelling can hide one.
"""

from __future__ import annotations

import struct

GLOBAL_SECTIONS = (".nv.global", ".nv.global.init")
_ELF64_LE = b"\x7fELF\x02\x01"


class CubinError(ValueError):
    """The image is not a 64-bit little-endian ELF file whose section table can be read."""


def sections(image: bytes) -> dict[str, int]:
    """Section name -> size in bytes (sections of one name summed)."""
    if image[:6] != _ELF64_LE:
        raise CubinError("not a 64-bit little-endian ELF image")
    try:
        (shoff,) = struct.unpack_from("<Q", image, 0x28)
        shentsize, shnum, shstrndx = struct.unpack_from("<HHH", image, 0x3A)
        header = lambda i: struct.unpack_from("<IIQQQQ", image, shoff + i * shentsize)
        names_at = header(shstrndx)[4]
        out: dict[str, int] = {}
        for i in range(shnum):
            name_off, _type, _flags, _addr, _off, size = header(i)
            start = names_at + name_off
            name = image[start : image.index(b"\0", start)].decode("ascii", "replace")
            out[name] = out.get(name, 0) + size
    except (struct.error, ValueError, IndexError) as exc:
        raise CubinError(f"unreadable section table: {exc}") from None
    return out


def device_global_bytes(image: bytes) -> int:
    """Bytes of module-level device memory the image declares (see the module docstring)."""
    found = sections(image)
    return sum(found.get(name, 0) for name in GLOBAL_SECTIONS)
