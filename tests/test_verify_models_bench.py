"""benchmarks/models.py at tiny sizes on the CPU: the file format the GPU run's goals are read
from, and one-line errors for bad arguments."""

from __future__ import annotations

import importlib
import json

import pytest


def bench():
    return importlib.import_module("benchmarks.models")


def test_bad_arguments_are_one_line_errors(tmp_path, capsys):
    b = bench()
    out = ["--out-dir", str(tmp_path), "--tiny"]
    assert b.main([*out, "--starters", "--models", "llama,t5"]) == 2
    assert "--models t5: use some of llama, qwen2, gpt2, bert" in capsys.readouterr().err
    assert b.main(out) == 2
    assert "exactly one of --starters or --workspace" in capsys.readouterr().err
    assert b.main([*out, "--starters", "--mode", "compile", "--no-compile"]) == 2


@pytest.mark.slow
def test_tiny_gpt2_run_writes_the_goal_files(tmp_path):
    pytest.importorskip("transformers")
    b = bench()
    args = ["--tiny", "--starters", "--no-compile", "--models", "gpt2", "--out-dir", str(tmp_path),
            "--commit", "abc1234", "--prefix", "cpu"]  # fmt: skip
    assert b.main(args) == 0
    data = json.loads((tmp_path / "cpu-models-latest.json").read_text())
    assert {"gpu", "torch", "triton", "commit", "date", "rows"} <= set(data)
    assert data["commit"] == "abc1234" and data["gpu"] == "cpu"
    rows = {r["mode"]: r for r in data["rows"]}
    assert set(rows) == {"eager", "patched"}
    for r in rows.values():
        assert {"model", "tokens", "mode", "ms", "predicted_ms", "kernels"} <= set(r)
        assert r["model"] == "gpt2" and r["tokens"] == b.TINY_BATCH * b.TINY_SEQ and r["ms"] > 0
    assert {"layernorm", "flash_attention"} <= set(rows["patched"]["kernels"])
    assert rows["eager"]["kernels"] == [] and rows["eager"]["predicted_ms"] is None
    assert data["models"]["gpt2"]["outputs_match"]
    md = (tmp_path / f"cpu-models-{data['date']}.md").read_text()
    assert "## gpt2 (32 tokens" in md and "| patched |" in md
