"""Where a model handed over as (model, inputs) runs: a parameter-free model must not fall back
to the CPU on a GPU machine, and the dtype reported is the one its tensors are in."""

from __future__ import annotations

import torch
from torch import nn

from autokernel.model.loading import place_inputs, run_placement


class Softmax(nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.softmax(x, dim=-1)


class Scaled(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.register_buffer("scale", torch.ones(4, dtype=torch.float16))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x * self.scale


def test_parameter_free_model_with_cpu_inputs_goes_to_the_gpu_when_there_is_one():
    x = torch.randn(2, 4, dtype=torch.bfloat16)
    device, dtype = run_placement(Softmax(), [x], cuda_available=True)
    assert device.type == "cuda" and dtype == torch.bfloat16
    device, dtype = run_placement(Softmax(), [x], cuda_available=False)
    assert device.type == "cpu" and dtype == torch.bfloat16


def test_parameters_then_buffers_decide_before_the_inputs():
    x = torch.randn(2, 4)
    assert run_placement(nn.Linear(4, 4).double(), [x], cuda_available=True) == (
        torch.device("cpu"), torch.float64,
    )  # fmt: skip
    assert run_placement(Scaled(), [x], cuda_available=True) == (torch.device("cpu"), torch.float16)


def test_integer_inputs_only_report_float32_and_nested_inputs_are_read():
    ids = torch.zeros(2, 3, dtype=torch.long)
    assert run_placement(Softmax(), [ids], cuda_available=False)[1] == torch.float32
    nested = [(ids, torch.randn(2, dtype=torch.float16))]
    assert run_placement(Softmax(), nested, cuda_available=False)[1] == torch.float16


def test_place_inputs_moves_tensors_and_keeps_the_rest():
    x, flag = torch.randn(2), True
    moved = place_inputs([x, [x], flag], torch.device("cpu"))
    assert torch.equal(moved[0], x) and isinstance(moved[1], list) and moved[2] is True
