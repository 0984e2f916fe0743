"""The command line as a user meets it: exit codes, messages instead of tracebacks, JSON out."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
from typer.testing import CliRunner

import autokernel
from autokernel import secrets
from autokernel.cli import app
from autokernel.secrets import MASK, register_secret

runner = CliRunner()


def test_help_lists_commands():
    result = runner.invoke(app, ["--help"])
    assert result.exit_code == 0 and "bench" in result.output


@pytest.mark.slow
def test_bench_starter_passes_and_writes_verdict_json(tmp_path):
    out = tmp_path / "verdict.json"
    result = runner.invoke(app, ["bench", "--kernel", "reduce", "--quick", "--json", str(out)])
    assert result.exit_code == 0, result.output
    assert "PASS" in result.output and "CPU" in result.output
    data = json.loads(out.read_text())
    assert data["status"] == "PASS" and data["kernel_type"] == "reduce"
    assert data["stages"][0]["name"] == "smoke"


@pytest.mark.slow
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


@pytest.mark.slow
def test_version_short_help_and_python_dash_m():
    version = runner.invoke(app, ["--version"])
    assert version.exit_code == 0 and version.output.strip() == (
        f"autokernel {autokernel.__version__} ({autokernel.DISTRIBUTION})"
    )
    for args in (["-h"], ["bench", "-h"], ["run", "-h"]):
        result = runner.invoke(app, args)
        assert result.exit_code == 0 and "--help" in result.output, args
    out = subprocess.run([sys.executable, "-m", "autokernel", "--version"], capture_output=True,
                         text=True, timeout=120)  # fmt: skip
    assert out.returncode == 0 and out.stdout == version.output


def test_shell_completion_completes_commands_and_options():
    def complete(words: str) -> list[str]:
        env = {"_AUTOKERNEL_COMPLETE": "complete_bash", "COMP_WORDS": words,
               "COMP_CWORD": str(len(words.split()) - 1)}  # fmt: skip
        result = runner.invoke(app, [], prog_name="autokernel", env=env)
        return result.output.split()

    assert complete("autokernel be") == ["bench"]
    assert "--agent-command" in complete("autokernel run --agent")
    # the bash script, as `--show-completion` prints it in bash; asked for by name, since that
    # option finds the shell among the parent processes, and a test run need not have one
    source = {"_AUTOKERNEL_COMPLETE": "source_bash"}
    script = runner.invoke(app, [], prog_name="autokernel", env=source)
    assert script.exit_code == 0 and "_AUTOKERNEL_COMPLETE=complete_bash" in script.output


def test_messages_keep_their_brackets(tmp_path, monkeypatch):
    """Rich markup must not eat `[openai]` (a pip extra) or `[redacted]` (a masked key)."""
    monkeypatch.setattr(secrets, "_registered", set())  # this test's keys stay in this test
    monkeypatch.setitem(sys.modules, "openai", None)  # the SDK is not installed
    result = runner.invoke(
        app, ["run", "--kernel", "softmax", "--agent", "openai", "--llm-model", "m", "-w",
              str(tmp_path / "ws")], env={"OPENAI_API_KEY": "sk-brackets-test-0123456789"},
    )  # fmt: skip
    assert result.exit_code == 2
    assert f"pip install '{autokernel.DISTRIBUTION}[openai]'" in result.output, result.output

    register_secret("sk-never-printed-0123456789abcdef")
    result = runner.invoke(app, ["bench", str(tmp_path / "sk-never-printed-0123456789abcdef")])
    assert result.exit_code == 2 and f"{MASK}: no such file" in result.output, result.output


def test_an_unknown_setting_is_one_line_naming_the_known_ones(tmp_path):
    ws = tmp_path / "ws"
    ws.mkdir()
    (ws / "autokernel.yaml").write_text("agent: tuner\nllm_modle: gpt-5\n")
    result = runner.invoke(
        app, ["run", "--kernel", "softmax", "--max-experiments", "1", "-w", str(ws)]
    )
    assert result.exit_code == 2
    (line,) = result.output.strip().splitlines()
    assert "llm_modle" in line and "known: agent, llm_model, base_url" in line, line


def test_every_error_the_cli_maps_names_an_exception_of_ours():
    import importlib

    import typer

    from autokernel.cli.errors import ERRORS, handled
    from autokernel.session import SessionError

    for name in ERRORS:
        module, _, cls = name.partition(":")
        assert issubclass(getattr(importlib.import_module(module), cls), Exception), name
    with pytest.raises(typer.Exit) as caught, handled():
        raise SessionError("no plan.yaml [here]")
    assert caught.value.exit_code == 2
    with pytest.raises(KeyError), handled():
        raise KeyError("a bug keeps its traceback")


def test_ctrl_c_while_starting_is_one_line_not_a_traceback(monkeypatch, capsys):
    """A Ctrl-C while the commands import torch (seconds) comes before any command handles it."""
    import importlib.abc

    from autokernel import entry

    class Interrupted(importlib.abc.MetaPathFinder):
        def find_spec(self, name, path, target=None):
            if name == "autokernel.cli":
                raise KeyboardInterrupt
            return None

    monkeypatch.delitem(sys.modules, "autokernel.cli", raising=False)
    monkeypatch.setattr(sys, "meta_path", [Interrupted(), *sys.meta_path])
    with pytest.raises(SystemExit) as stop:
        entry.main()
    assert stop.value.code == 130
    assert capsys.readouterr().err == "interrupted while starting: nothing was written\n"
