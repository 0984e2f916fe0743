"""A generic target's starter, from its region description: Inductor's code for it on this
machine's device (autokernel.model.inductor_code), for any size and for the model's own,
written as one kernel.py
(autokernel.model.starter). Generated once per region and device in a process."""

from __future__ import annotations

from collections.abc import Mapping

import torch

from autokernel.model.inductor_code import InductorCodeError, generate
from autokernel.model.starter import StarterError, build
from autokernel.specs.region import Region, RegionError

_MADE: dict[tuple[str, str], str] = {}


class NoStarter(Exception):
    """No kernel.py can start this region's night; the message says why."""


def starter_for(description: Mapping, device: torch.device) -> str:
    try:
        region = Region.from_dict(description)
    except RegionError as exc:
        raise NoStarter(f"the region cannot be used: {exc}") from None
    key = (region.digest(), str(device))
    if key not in _MADE:
        try:
            code = generate(region, device)
        except InductorCodeError as exc:
            raise NoStarter(f"no starter from torch.compile's code: {exc}") from None
        try:
            static = generate(region, device, dynamic=False)
        except InductorCodeError:
            static = None  # the any-shape code serves the model's shape too
        try:
            _MADE[key] = build(region, code, static)
        except StarterError as exc:
            raise NoStarter(f"no starter from torch.compile's code: {exc}") from None
    return _MADE[key]
