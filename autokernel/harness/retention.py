"""How many bytes of tensors the candidate's process holds beyond the harness's own: the memory
a kernel keeps from one call to the next.

Why: the determinism stage compares outputs of identical inputs, and a kernel that keeps the
outputs it returned (with their inputs, or a fingerprint of them) can replay them, bit for bit,
for every identical input that comes again: a racy reduction then looks deterministic
(tests/faults/softmax_nondeterministic_replay_all.py). Whatever it replays it must keep in a
tensor: in device memory, in pinned host memory the device reads, or in plain host memory it
copies back (the guards leave kernel.py no other way to hold element values: no .tolist, .item,
.numpy, files). So the stage (stages._stage_determinism) sizes its calls by this figure and
fails a kernel whose figure grows with the inputs it has seen.

What is counted, after a garbage collection (a reference cycle the kernel left is not memory it
keeps), minus the storages of `own` (the harness's inputs and held outputs, serve.Session):
- CUDA: every allocated block of the caching allocator, from its snapshot: exact block sizes,
  and a tensor only C++ holds (a `.grad`, a view's base) holds its block all the same;
- host: the storages of every tensor object alive on the CPU, pinned or not, each counted once
  (torch keeps no statistics of its CPU allocator; glibc's heap figure also moves with every
  Python object, about 0.5 KB a call under the interpreter, where tensors hold the exact sum).
"""

from __future__ import annotations

import gc
from collections.abc import Iterable

import torch


def _storage(t: torch.Tensor) -> tuple[int, int]:
    """(data pointer, bytes) of a tensor's whole storage: a view holds all of it."""
    try:
        s = torch.Tensor.untyped_storage(t)
        return s.data_ptr(), s.nbytes()
    except (RuntimeError, NotImplementedError):  # sparse or other storage-less layouts
        return 0, 0


def _own(tensors: Iterable[object]) -> set[int]:
    return {_storage(t)[0] for t in tensors if isinstance(t, torch.Tensor)} - {0}


def _host(own: set[int]) -> int:
    seen: dict[int, int] = {}
    for obj in gc.get_objects():
        # type(), not isinstance(): isinstance reads __class__, which some objects compute
        if issubclass(type(obj), torch.Tensor) and obj.device.type == "cpu":
            ptr, nbytes = _storage(obj)
            if ptr and ptr not in own:
                seen[ptr] = max(nbytes, seen.get(ptr, 0))
    return sum(seen.values())


def _cuda(own: set[int]) -> int:
    if not (torch.cuda.is_available() and torch.cuda.is_initialized()):
        return 0
    return sum(
        block["size"]
        for segment in torch.cuda.memory_snapshot()
        for block in segment["blocks"]
        if block["state"] == "active_allocated" and block["address"] not in own
    )


def held_bytes(own: Iterable[object]) -> int:
    """Bytes of tensor memory the process holds now beyond the storages of `own`."""
    gc.collect()
    mine = _own(own)
    return _host(mine) + _cuda(mine)
