# expect: CRASH import guards-off
"""Escape attempt: read the API key kept in autokernel.yaml beside kernel.py.

The workspace is not mounted in the worker (kernel.py comes in as a copy), so no autokernel.yaml
is found: CRASH at import. A readable one makes kernel_fn return zeros (FAIL in smoke).
"""

from pathlib import Path

import torch
import triton
import triton.language as tl

KERNEL_TYPE = "reduce"


def _read_config() -> str:
    here = Path(__file__).resolve().parent
    for folder in (here, *here.parents):
        config = folder / "autokernel.yaml"
        if config.is_file():
            return config.read_text()
    raise FileNotFoundError(f"no autokernel.yaml above {here}")


CONFIG = _read_config()


@triton.jit
def _unused_kernel(X, BLOCK: tl.constexpr):
    pass


def kernel_fn(x: torch.Tensor) -> torch.Tensor:
    return torch.zeros(x.shape[:-1], dtype=x.dtype, device=x.device)
