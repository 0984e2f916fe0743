# expect: REJECTED static
"""Planted forgery: reaches sys.modules through a string path on the typing module and replaces
the harness's comparison with one that always agrees.

typing.sys is outside typing's allow-list, attrgetter is refused, attributes are never assigned.
"""

import operator
import typing

import torch

KERNEL_TYPE = "softmax"

_modules = operator.attrgetter("sys.modules")(typing)
_compare = _modules.get("autokernel.harness.compare")
if _compare is not None:
    _compare.compare = lambda *args, **kwargs: None


def kernel_fn(x: torch.Tensor) -> torch.Tensor:
    return torch.zeros(x.shape, dtype=x.dtype, device=x.device)
