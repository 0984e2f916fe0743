# expect: REJECTED static
"""Planted escape: setattr by string, dunders included, through dataclasses.asdict's deep copy.

enum.Enum's functional API takes its class body as a dict, so a dunder arrives as a string key
that no rule reads: here __reduce_ex__, with __deepcopy__ set to None so copy.deepcopy falls
back to it. dataclasses.asdict deep-copies every field value that is not a dataclass, and the
deep copy calls the reduction and sets each name of its state on the object it returns, with
setattr: any attribute of any object the file can name, here one of triton.language's shared
functions (in a comparison the best kernel's calls go through the same objects).
"""

import dataclasses
import enum

import torch
import triton.language as tl

KERNEL_TYPE = "softmax"


def target():
    return tl.sum


def reduce_ex(self, proto):
    return (target, (), (None, {"__doc__": "planted", "planted": True}))


Planted = enum.Enum("Planted", {"A": 1, "__deepcopy__": None, "__reduce_ex__": reduce_ex})


@dataclasses.dataclass
class Holder:
    value: object


dataclasses.asdict(Holder(Planted.A))  # CHEAT: tl.sum.__doc__ and tl.sum.planted are set


def kernel_fn(x: torch.Tensor) -> torch.Tensor:
    return torch.empty_like(x)
