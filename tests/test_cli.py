"""The command line as a user meets it: exit codes, messages instead of tracebacks, JSON out."""

from __future__ import annotations

import json

from typer.testing import CliRunner

from autokernel.cli import app

runner = CliRunner()


def test_help_lists_commands():
    result = runner.invoke(app, ["--help"])
    assert result.exit_code == 0 and "bench" in result.output


def test_bench_starter_passes_and_writes_verdict_json(tmp_path):
    out = tmp_path / "verdict.json"
    result = runner.invoke(app, ["bench", "--kernel", "reduce", "--quick", "--json", str(out)])
    assert result.exit_code == 0, result.output
    assert "PASS" in result.output and "CPU" in result.output
    data = json.loads(out.read_text())
    assert data["status"] == "PASS" and data["kernel_type"] == "reduce"
    assert data["stages"][0]["name"] == "smoke"


def test_bench_failing_kernel_exits_1_and_says_where(tmp_path):
    path = tmp_path / "kernel.py"
    path.write_text(
        "import torch\nKERNEL_TYPE = 'reduce'\n\n\ndef kernel_fn(x):\n"
        "    return torch.empty(x.shape[:-1], dtype=torch.float32, device=x.device)\n"
    )
    result = runner.invoke(app, ["bench", str(path), "--no-compile"])
    assert result.exit_code == 1
    assert "FAIL" in result.output and "smoke" in result.output


def test_missing_file_is_a_message_not_a_traceback(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    result = runner.invoke(app, ["bench"])
    assert result.exit_code == 2
    assert "kernel.py" in result.output and "Traceback" not in result.output


def test_unknown_kernel_type_lists_known_ones():
    result = runner.invoke(app, ["bench", "--kernel", "conv2d"])
    assert result.exit_code == 2 and "softmax" in result.output


def test_bad_dtype_is_rejected():
    result = runner.invoke(app, ["bench", "--kernel", "reduce", "--dtype", "int3"])
    assert result.exit_code == 2 and "float16" in result.output
