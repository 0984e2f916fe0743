"""A match: what the matcher found a module, call or function to be, and how to replace it —
the type, the custom op's arguments, the plan's arguments and how the op's output becomes what
the original returned. The record profile (module_calls.py) and verify (patching.py) both hold;
the type's entry (specs/*_model.py) makes the Claim, the matcher names its type."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import torch

from autokernel.model.kinds import call_size
from autokernel.specs.model_side import Claim, first


@dataclass
class Match:
    kind: str
    op_args: tuple  # the custom op's arguments, the slot left out
    args: dict[str, object] = field(default_factory=dict)  # what plan.yaml keeps: eps, causal
    finish: Callable[[list[torch.Tensor]], Any] = first  # op outputs -> what the original gave
    more: tuple[tuple, ...] = ()  # further calls of the op (the k of a (q, k) rotary)

    @classmethod
    def of(cls, kind: str, claim: Claim | None) -> Match | None:
        if claim is None:
            return None
        return cls(kind, claim.op_args, claim.args, claim.finish, claim.more)

    @property
    def calls(self) -> tuple[tuple, ...]:
        return (self.op_args, *self.more)

    @property
    def shape(self) -> dict[str, int]:
        return call_size(self.kind, self.op_args)

    @property
    def dtype(self) -> torch.dtype:
        return self.op_args[0].dtype
