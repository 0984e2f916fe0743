"""benchmarks/patch_tax.py on the CPU: the eager and patched rows of a small model, with the
patched forward's calls really routed through the ops (zero-cost stand-ins for the kernels),
recorded where --results says."""

from __future__ import annotations

import json
from pathlib import Path

import torch

from benchmarks import patch_tax

MODEL = Path(__file__).parent / "data" / "ops" / "add_layernorm.py"


def test_stand_in_returns_the_reference_output_once_computed():
    calls = []

    def reference(x):
        calls.append(1)
        return x * 2

    fn = patch_tax.stand_in(reference)
    x = torch.ones(3)
    assert torch.equal(fn(x), x * 2) and torch.equal(fn(x), x * 2)
    assert len(calls) == 1  # the second call costs nothing
    fn(torch.ones(4))
    assert len(calls) == 2  # a new signature is computed once


def test_rows_say_how_many_calls_were_routed(tmp_path):
    rc = patch_tax.main([str(MODEL), "--rounds", "2", "--calls", "3", "--results", str(tmp_path),
                         "--commit", "abc1234"])  # fmt: skip
    assert rc == 0
    (line,) = (tmp_path / "cpu.jsonl").read_text().splitlines()
    entry = json.loads(line)
    assert entry["question"] == "patch_tax" and entry["commit"] == "abc1234"
    rows = {r["variant"]: r for r in entry["rows"]}
    assert rows["eager"]["routed_calls"] == 0 and rows["eager"]["tax_us"] == 0
    patched = rows["patched (zero-cost kernels)"]
    assert patched["routed_calls"] == 1  # the model's one F.layer_norm, each forward
    assert patched["host_us"] > 0 and patched["tax_per_call_us"] is not None


def test_bad_arguments_are_one_line_errors(capsys):
    assert patch_tax.main([]) == 2
    assert patch_tax.main([str(MODEL), "--calls", "0"]) == 2
    assert "error:" in capsys.readouterr().err
