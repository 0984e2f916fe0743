"""`autokernel run --mode`: a bad mode is a clear error; the mode is kept in the state and
`--resume` keeps it rather than switching the night's baseline half way."""

from __future__ import annotations

import json

import pytest
from test_run_cli import autokernel


@pytest.mark.slow
def test_bad_mode_is_a_clear_error_before_anything_changes(tmp_path):
    ws = tmp_path / "ws"
    out = autokernel("run", "--kernel", "softmax", "--mode", "fast", "--workspace", str(ws),
                     timeout=120)  # fmt: skip
    assert out.returncode == 2 and "--mode 'fast'" in out.stdout + out.stderr
    assert "Traceback" not in out.stderr and not (ws / ".git").exists()


@pytest.mark.slow
def test_mode_is_stored_and_resume_keeps_it(tmp_path):
    ws = tmp_path / "ws"
    out = autokernel("run", "--kernel", "softmax", "--mode", "compile", "--max-experiments", "1",
                     "--quick", "--quiet", "--workspace", str(ws))  # fmt: skip
    assert out.returncode == 0, out.stdout + out.stderr
    state = json.loads((ws / ".autokernel" / "state.json").read_text())
    assert state["mode"] == "compile" and state["reach"] == 0.0  # no GPU: the rule is off
    switched = autokernel("run", "--resume", "--mode", "eager", "--workspace", str(ws))
    assert switched.returncode == 2 and "started with --mode compile" in switched.stdout + \
        switched.stderr  # fmt: skip
    again = autokernel("run", "--resume", "--max-experiments", "1", "--quick", "--quiet",
                       "--workspace", str(ws))  # fmt: skip
    assert again.returncode == 0, again.stdout + again.stderr
    assert json.loads((ws / ".autokernel" / "state.json").read_text())["mode"] == "compile"
