"""What the CUDA tests share: the nvcc to compile with on a CPU machine."""

from __future__ import annotations

import os

import pytest

from autokernel import cuda_build
from autokernel.cuda_build import CudaBuildError


def nvcc_or_skip() -> str:
    """The nvcc of the nvidia-cuda-nvcc wheel CI installs (pyproject's nvcc extra), else any
    the builder finds; a developer machine without one skips, CI fails: a broken CUDA source
    must not land."""
    try:
        return cuda_build.wheel_nvcc() or cuda_build.find_nvcc()
    except CudaBuildError:
        if os.environ.get("CI"):
            raise
        pytest.skip("no nvcc here: pip install -e '.[dev,nvcc]' brings the nvidia-cuda-nvcc wheel")
