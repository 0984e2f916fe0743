"""benchmarks/verify_tolerance.py on its smallest case: a tiny bf16 Llama, one seed, the right
starters and an RMSNorm eps 10x too large. The JSON lines carry what docs/verify-tolerance.md
quotes, and the planted fault moves the logits further from float32 than the right kernels do
(measured: 2.46x and 4.51x eager's distance, the fault failing the reference rule alone)."""

from __future__ import annotations

import importlib
import json

import pytest

pytest.importorskip("transformers")

FIELDS = {"family", "dtype", "init", "layers", "seed", "fault", "output", "err_eager",
          "err_patched", "ratio", "old_error", "old_tolerance", "old_pass", "new_rule",
          "new_margin", "new_pass", "calls"}  # fmt: skip


def test_the_planted_fault_moves_further_than_the_right_kernels(tmp_path, capsys):
    script = importlib.import_module("benchmarks.verify_tolerance")
    jsonl, md = tmp_path / "out.jsonl", tmp_path / "out.md"
    args = ["--families", "llama", "--faults", "none,rms_eps10", "--seeds", "0",
            "--inits", "default", "--out-jsonl", str(jsonl), "--out-md", str(md)]  # fmt: skip
    assert script.main(args) == 0
    rows = [json.loads(line) for line in jsonl.read_text().splitlines()]
    faults = [(r["fault"], r["output"]) for r in rows]
    assert faults == [("none", "output.logits"), ("rms_eps10", "output.logits")]
    right, wrong = rows
    for r in rows:
        assert set(r) == FIELDS
        case = (r["family"], r["dtype"], r["init"], r["layers"], r["seed"])
        assert case == ("llama", "bf16", None, 2, 0)
        assert r["calls"]["rmsnorm"] == 5 and r["calls"]["fused_mlp"] == 2
        assert r["err_eager"] > 0 and r["ratio"] == pytest.approx(r["err_patched"] / r["err_eager"])
        assert r["old_pass"] and r["old_tolerance"] == pytest.approx(0.1)
    assert right["err_eager"] == wrong["err_eager"]  # the same model and inputs
    assert right["new_pass"] and right["ratio"] < 4
    assert not wrong["new_pass"] and wrong["new_rule"] == "fp32-reference"
    assert wrong["ratio"] > 4 > right["ratio"] and wrong["ratio"] > 1.5 * right["ratio"]
    table = md.read_text()
    assert "| llama | default | 2 | rms_eps10 | 0 |" in table
    assert table in capsys.readouterr().out


def test_unknown_names_are_argument_errors(capsys):
    script = importlib.import_module("benchmarks.verify_tolerance")
    with pytest.raises(SystemExit):
        script.main(["--faults", "none,eps"])
    assert "--faults: unknown eps" in capsys.readouterr().err
    assert script.seeds_of("0-2,5") == [0, 1, 2, 5]
    assert script.inits_of("default,0.2") == [None, 0.2]
