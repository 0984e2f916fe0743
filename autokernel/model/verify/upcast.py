"""The model run once in float32, in place: the reference a half-precision model is judged by.

A bf16 model's eager output is itself rounded: to tell a right kernel from a wrong one, verify
needs the model's exact answer, and float32 is exact next to bf16 or fp16 (2^-24 against 2^-8
or 2^-11). A copy of the model would double its memory for as long as it lives, so the model
is cast up in place, one forward runs, and every tensor is cast back down: an upcast is exact,
so the round trip gives every parameter and buffer back bit for bit, its dtype included.
Tensors already in float32 or wider, and integer ones, are left alone: never `model.to()`, which
would also change the float32 buffers (rotary tables, masks) a model keeps on purpose.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import torch
from torch import nn

REFERENCE_DTYPE = torch.float32
LOW = (torch.bfloat16, torch.float16)  # the dtypes whose models get a float32 reference


class UpcastError(Exception):
    """The float32 reference could not be made (out of memory, tensors sharing storage)."""


def _tensors(model: nn.Module) -> list[tuple[str, nn.Module, str, torch.Tensor]]:
    """(qualified name, owner, attribute, tensor) of every half-precision parameter and buffer,
    each once (tied weights are one Parameter, reached through each of their modules)."""
    seen: set[int] = set()
    out = []
    for prefix, m in model.named_modules(remove_duplicate=False):
        for table in (m._parameters, m._buffers):
            for attr, t in table.items():
                if t is None or id(t) in seen or t.dtype not in LOW:
                    continue
                seen.add(id(t))
                out.append((f"{prefix}.{attr}" if prefix else attr, m, attr, t))
    return out


def _shares_storage(entries: list[tuple[str, nn.Module, str, torch.Tensor]]) -> str | None:
    """Two distinct tensors over one storage (views of each other) would come back as two
    separate tensors: the model's aliasing would change, so such a model gets no reference."""
    owner: dict[int, str] = {}
    for name, _, _, t in entries:
        key = t.untyped_storage().data_ptr()
        if key in owner and t.numel():
            return f"{owner[key]} and {name} share storage"
        owner[key] = name
    return None


@contextmanager
def upcast(model: nn.Module, dtype: torch.dtype = REFERENCE_DTYPE) -> Iterator[None]:
    """Inside: every bf16/fp16 parameter and buffer of `model` in `dtype`, the same Parameter
    objects (hooks, tied weights and optimizers still see them). Afterwards each holds its own
    values in its own dtype again, even when the body raised. Raises UpcastError, with nothing
    left changed, when the cast runs out of memory or tensors share storage."""
    entries = _tensors(model)
    why = _shares_storage(entries)
    if why:
        raise UpcastError(f"{why}: casting them apart would change the model")
    done: list[tuple[torch.Tensor, torch.dtype]] = []
    try:
        for _, _, _, t in entries:
            low = t.dtype
            t.data = t.data.to(dtype)  # the half-precision storage is freed as it goes
            done.append((t, low))
    except (torch.OutOfMemoryError, MemoryError) as exc:
        _restore(done)
        raise UpcastError(f"out of memory casting the model to {dtype}: {exc}") from None
    try:
        yield
    finally:
        _restore(done)


def _restore(done: list[tuple[torch.Tensor, torch.dtype]]) -> None:
    for t, low in done:
        t.data = t.data.to(low)  # exact: the values came from `low`


def inputs_up(obj: Any, dtype: torch.dtype = REFERENCE_DTYPE) -> Any:
    """The inputs as the reference model takes them: half-precision tensors cast up (exact),
    everything else (token ids, masks, flags) as it is."""
    if isinstance(obj, torch.Tensor):
        return obj.to(dtype) if obj.dtype in LOW else obj
    if isinstance(obj, dict):
        return {k: inputs_up(v, dtype) for k, v in obj.items()}
    if isinstance(obj, list):
        return [inputs_up(v, dtype) for v in obj]
    if isinstance(obj, tuple):
        return tuple(inputs_up(v, dtype) for v in obj)
    return obj


def reference_outputs(
    model: nn.Module, inputs: list, model_dtype: torch.dtype
) -> tuple[Any, str | None]:
    """(the model's float32 outputs, None) for a bf16/fp16 model; (None, why not) where there
    are none: a float32 model needs none, and a model that cannot be cast (out of memory,
    shared storage) or whose float32 forward fails is judged by the eager rule alone."""
    if model_dtype not in LOW:
        return None, None
    fallback = "outputs judged against eager alone (the old, looser rule)"
    try:
        with torch.no_grad(), upcast(model):
            return model(*inputs_up(inputs)), None
    except UpcastError as exc:
        return None, f"no float32 reference: {exc}; {fallback}"
    except (torch.OutOfMemoryError, MemoryError):
        return None, f"no float32 reference: out of memory in its forward; {fallback}"
    except Exception as exc:  # the user's forward may assume its own dtype anywhere
        why = f"{type(exc).__name__}: {str(exc).splitlines()[0][:200] if str(exc) else ''}"
        return None, f"no float32 reference: the float32 forward raised {why}; {fallback}"
