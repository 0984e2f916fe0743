"""benchmarks/profile_check.py runs on the CPU at tiny sizes and writes its rows."""

from __future__ import annotations

import importlib
import json


def test_profile_check_small_on_cpu(tmp_path, capsys):
    module = importlib.import_module("benchmarks.profile_check")
    out = tmp_path / "rows.json"
    code = module.main(["--small", "--no-compile", "--iters", "1", "--warmup", "0", "--json",
                        str(out)])  # fmt: skip
    rows = json.loads(out.read_text())["rows"]
    assert code == 0 and {r["case"] for r in rows} == set(module.SINGLE_OPS)
    assert all(r["consistent"] and "error" not in r for r in rows)
    softmax = next(r for r in rows if r["case"] == "softmax")
    assert [t["kernel_type"] for t in softmax["targets"]] == ["softmax"]
    assert "| softmax | cpu |" in capsys.readouterr().out
