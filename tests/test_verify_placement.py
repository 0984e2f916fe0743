"""verify_model runs a parameter-free model where its report says it ran: on the GPU when there
is one (its get_inputs may have made CPU tensors), in the dtype its tensors are in."""

from __future__ import annotations

from pathlib import Path

import torch
from torch import nn

from autokernel.model.kernel_ops import load_kernel
from autokernel.model.verify import verifier as verify

SOFTMAX = Path(__file__).parents[1] / "kernels" / "softmax.py"


class Softmax(nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.softmax(x, dim=-1)


def test_parameter_free_model_reports_the_dtype_it_ran_in():
    x = torch.randn(4, 64, dtype=torch.float16)
    result = verify.verify_model(Softmax(), [x], [load_kernel(SOFTMAX)], timing=False)
    assert (result.device, result.dtype) == ("cpu", "float16")
    assert result.calls["softmax"]["kernel"] == 1 and result.ok


def test_parameter_free_model_is_sent_to_the_gpu_and_reported_where_it_ran(monkeypatch):
    """A GPU machine, mocked: verify asks for the inputs on cuda; the report names the device
    the inputs were really placed on (here the mock keeps them on the CPU)."""
    asked: list[torch.device] = []

    def place(inputs, device):
        asked.append(device)
        return inputs

    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(verify, "place_inputs", place)
    x = torch.randn(4, 64, dtype=torch.float16)
    result = verify.verify_model(Softmax(), [x], [load_kernel(SOFTMAX)], timing=False)
    assert [d.type for d in asked] == ["cuda"]
    assert (result.device, result.dtype) == ("cpu", "float16")
