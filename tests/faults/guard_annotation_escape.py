# expect: REJECTED static
"""Planted escape: a parameter annotation runs at import (no `from __future__ import
annotations`), and the guard never looked at annotations.

Every node of the file is checked, annotations and defaults included.
"""

import torch

KERNEL_TYPE = "softmax"


def kernel_fn(x: open("/dev/null", "w").write("escaped")) -> torch.Tensor:  # noqa: F821
    return torch.zeros(x.shape, dtype=x.dtype, device=x.device)
