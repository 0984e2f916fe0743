"""What passes between the judge and the candidate's process, in forms that cannot run code.

Requests go to the worker as one JSON line each on its stdin; replies come back as one JSON line
each on a private copy of the worker's original stdout (the worker points fd 1 at a file before
any candidate code runs, so a candidate's prints land there, not in the channel). A candidate can
still write to that copy, since it owns its process: every reply is therefore parsed as untrusted
data, and anything malformed ends the evaluation.

Outputs travel as raw bytes in a file of the worker's directory plus a JSON header (dtype, shape,
byte count). The judge reads them with torch.from_file into plain uint8 memory and views that as
the dtype: nothing in the file can execute on load (pickle, and so torch.load without
weights_only, would run whatever the file names), and what comes out is a plain torch.Tensor of
exactly the shape and dtype the header claims, whatever object the candidate returned.

Both ends stage GPU outputs through one page-locked buffer per thread, kept for the process's
next transfer: the benchmark hands over each timed size's full output twice (4096x50257 bf16 is
411 MB), and on the H200 copying into fresh pageable memory (`.cpu()`, then `readinto` a new
tensor) took 2.2 of a warm softmax benchmark's 3.8 s (harness_diag benchprof), most of it page
faults on memory touched once. Per thread, because the parallel loop's judges decode side by side.
"""

from __future__ import annotations

import json
import math
import os
import re
import select
import stat
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch

MAX_LINE_BYTES = 4 << 20  # a reply longer than this is not one of ours
MAX_DEPTH = 4  # the deepest reply is three levels (baselines by size, by kind)
MAX_DIMS = 8
OUTPUT_SLACK = 4  # an output may take this many times its expected bytes before it is refused
TENSOR_DTYPES: dict[str, torch.dtype] = {
    str(d).removeprefix("torch."): d
    for d in (torch.float16, torch.bfloat16, torch.float32, torch.float64, torch.int32,
              torch.int64, torch.int8, torch.uint8, torch.bool)
}  # fmt: skip
SAFE_NAME = re.compile(r"^[A-Za-z0-9_.-]{1,64}$")
_STAGING = threading.local()  # .buf: this thread's page-locked uint8 buffer, grown on demand
# Largest transfer staged: page-locked memory is never swapped, and the judge keeps its buffer
# all night (the largest benchmark output, LLaMA's lm_head in bf16, is 1.05 GB).
STAGING_MAX_BYTES = 2 << 30


class ChannelError(Exception):
    """The worker's reply is missing, malformed or inconsistent."""


class ChannelTimeout(Exception):
    """No reply before the deadline."""


def encode_tensor(t: object, directory: Path, name: str) -> dict[str, Any]:
    """Write a plain tensor's bytes to directory/name; return the header that describes them.
    Runs in the worker. Anything but exactly torch.Tensor is refused before a byte is read, so a
    subclass's conversion methods (where its work could hide) never run here."""
    if type(t) is not torch.Tensor:
        raise TypeError(f"expected a torch.Tensor, got {type(t).__module__}.{type(t).__name__}")
    dtype = str(t.dtype).removeprefix("torch.")
    if dtype not in TENSOR_DTYPES:
        raise TypeError(f"output dtype {t.dtype} cannot be handed to the judge")
    flat = t.detach().reshape(-1).contiguous()
    if flat.is_cuda and 0 < flat.numel() * flat.element_size() <= STAGING_MAX_BYTES:
        raw = staging(flat.numel() * flat.element_size())
        raw.copy_(flat.view(torch.uint8))  # synchronous: the bytes are there when it returns
    else:
        flat = flat.cpu()
        raw = flat.view(torch.uint8) if flat.numel() else torch.empty(0, dtype=torch.uint8)
    raw.numpy().tofile(directory / name)
    return {"file": name, "dtype": dtype, "shape": list(t.shape), "nbytes": int(raw.numel())}


def staging(nbytes: int) -> torch.Tensor:
    """A page-locked uint8 tensor of exactly nbytes, a view of this thread's staging buffer: its
    contents last until the thread's next call, so copy out of it before then. CUDA only."""
    buf = getattr(_STAGING, "buf", None)
    if buf is None or buf.numel() < nbytes:
        _STAGING.buf = None  # free the smaller one before pinning the larger
        buf = _STAGING.buf = torch.empty(nbytes, dtype=torch.uint8, pin_memory=True)
    return buf[:nbytes]


def output_bound(shape: tuple[int, ...], dtype: torch.dtype) -> int:
    """The most bytes the judge reads for an output expected to have this shape and dtype. A
    candidate may return a wrong shape (the stage reports it), but a header claiming terabytes,
    backed by a sparse file, would take the judge's memory and the night with it."""
    expected = math.prod(shape) * torch.empty(0, dtype=dtype).element_size()
    return OUTPUT_SLACK * expected + (1 << 20)


def decode_tensor(
    header: object, directory: Path, device: torch.device, max_bytes: int
) -> torch.Tensor:
    """The plain tensor a header and its file describe, on `device`; ChannelError for anything
    that does not parse exactly or claims more than max_bytes (the judge's bound for the call).
    Runs in the judge; the file is removed once read."""
    if not isinstance(header, dict):
        raise ChannelError(f"tensor header is {type(header).__name__}, not an object")
    name, dtype_name, shape, nbytes = (header.get(k) for k in ("file", "dtype", "shape", "nbytes"))
    if not isinstance(name, str) or not SAFE_NAME.match(name) or name.startswith("."):
        raise ChannelError(f"tensor file name {name!r} is not a plain name")
    if dtype_name not in TENSOR_DTYPES:
        raise ChannelError(f"tensor dtype {dtype_name!r} is not one the judge reads")
    ok_shape = isinstance(shape, list) and len(shape) <= MAX_DIMS
    if not ok_shape or not all(type(d) is int and d >= 0 for d in shape):
        raise ChannelError(f"tensor shape {shape!r} is not a list of sizes")
    dtype = TENSOR_DTYPES[dtype_name]
    itemsize = torch.empty(0, dtype=dtype).element_size()
    expected = math.prod(shape) * itemsize
    if type(nbytes) is not int or nbytes != expected:
        raise ChannelError(f"tensor of shape {shape} {dtype_name} needs {expected} bytes, "
                           f"header says {nbytes!r}")  # fmt: skip
    path = directory / name
    if expected > max_bytes:
        path.unlink(missing_ok=True)
        raise ChannelError(f"an output of {expected} bytes where at most {max_bytes} are read")
    # Into the staging buffer only where .to(device) copies out of it (a CUDA device); a CPU
    # result must own its memory.
    pinned = device.type == "cuda" and 0 < expected <= STAGING_MAX_BYTES
    raw = staging(expected) if pinned else torch.empty(expected, dtype=torch.uint8)
    try:
        with _open_regular(path) as f:
            size = os.fstat(f.fileno()).st_size
            if size != expected:
                raise ChannelError(f"tensor file has {size} bytes, header says {expected}")
            # Copied, never mapped: the worker can truncate a file the judge has mapped, and a
            # read of a mapped page past the new end kills the reader with SIGBUS.
            if expected and f.readinto(memoryview(raw.numpy())) != expected:
                raise ChannelError(f"tensor file {name} shrank while it was read")
    except OSError as exc:
        raise ChannelError(f"cannot read tensor file {name}: {exc}") from None
    finally:
        path.unlink(missing_ok=True)
    return raw.view(dtype).reshape(shape).to(device)  # synchronous: the buffer is free again


def _open_regular(path: Path):
    """A file of the worker's directory opened for reading, or OSError: no link is followed (a
    link made inside the sandbox would be resolved by the judge, outside it, to a host file),
    opening never blocks (a FIFO would block open() forever), and only a regular file is read."""
    fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_NOCTTY)
    if not stat.S_ISREG(os.fstat(fd).st_mode):
        os.close(fd)
        raise OSError(f"{path.name} is not a regular file")
    return os.fdopen(fd, "rb")


def read_untrusted(path: Path, limit: int, tail: bool = False) -> bytes:
    """At most `limit` bytes of a file the worker can write (its last ones with tail), b"" when it
    is missing or not a regular file (see _open_regular): progress, ready, stderr."""
    try:
        with _open_regular(path) as f:
            if tail:
                f.seek(max(0, os.fstat(f.fileno()).st_size - limit))
            return f.read(limit)
    except OSError:
        return b""


def send(stream: Any, message: dict[str, Any]) -> None:
    stream.write(json.dumps(message).encode() + b"\n")
    stream.flush()


class Reader:
    """Reads reply lines from a pipe with a deadline, calling `tick` while it waits (the caller's
    housekeeping: phases, the spare beside the worker)."""

    def __init__(self, fd: int, poll_s: float = 0.05) -> None:
        self.fd, self.poll_s, self.buffer = fd, poll_s, b""

    def line(self, deadline: float, tick: Callable[[], None] = lambda: None) -> dict[str, Any]:
        """The next reply as a dict; ChannelError at end of file or on a malformed line,
        ChannelTimeout once `deadline` (time.monotonic) passes."""
        while b"\n" not in self.buffer:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise ChannelTimeout()
            readable, _, _ = select.select([self.fd], [], [], min(self.poll_s, remaining))
            if readable:
                chunk = os.read(self.fd, 1 << 16)
                if not chunk:
                    raise ChannelError("the worker closed its channel")
                self.buffer += chunk
                if len(self.buffer) > MAX_LINE_BYTES:
                    raise ChannelError("a reply line longer than any the worker writes")
            tick()
        raw, self.buffer = self.buffer.split(b"\n", 1)
        try:
            message = json.loads(raw)
        except (ValueError, RecursionError):  # nesting deeper than the parser's own stack
            raise ChannelError(f"a reply that is not JSON: {raw[:200]!r}") from None
        if not isinstance(message, dict):
            raise ChannelError(f"a reply that is not an object: {raw[:200]!r}")
        if _deeper_than(message, MAX_DEPTH):
            raise ChannelError(f"a reply nested deeper than any the worker writes: {raw[:200]!r}")
        return message


def _deeper_than(value: object, limit: int) -> bool:
    """Whether lists and objects nest more than `limit` levels in value. Replies are read with
    str() and compared downstream, and those recurse: bounded here, no reply can take the
    judge's stack."""
    level = [value]
    for _ in range(limit):
        level = [
            v
            for item in level
            for v in (item.values() if isinstance(item, dict) else item)
            if isinstance(v, dict | list)
        ]
        if not level:
            return False
    return True
