"""Ctrl-C during a night: the terminal sends SIGINT to every process of its foreground group,
and the loop answers the first one with "stopping after this experiment". The git processes
the workspace uses must survive it, or the experiment that was finishing fails (on the H200, a
broken pipe to a killed `git cat-file` turned a clean stop into "internal error")."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

SCRIPT = textwrap.dedent(
    """
    import os, signal, sys
    from pathlib import Path
    from autokernel.run.workspace import Workspace

    ws = Workspace.open(Path(sys.argv[1]))
    first = ws.start("t", "def kernel_fn(x):\\n    return x\\n", "exp 0")
    assert ws.show(first).startswith("def kernel_fn")  # whatever reads objects is running now
    signal.signal(signal.SIGINT, lambda *_: None)  # the loop: stop after this experiment
    os.killpg(0, signal.SIGINT)  # a terminal's Ctrl-C reaches the whole group
    sha = ws.commit_kernel("def kernel_fn(x):\\n    return x * 1\\n", "exp 1")
    assert ws.show(sha).endswith("x * 1\\n")
    assert ws.message(sha) == "exp 1"
    print("recorded")
    """
)


def test_a_ctrl_c_to_the_process_group_does_not_break_the_workspace(tmp_path):
    root = tmp_path / "ws"
    root.mkdir()
    env = {**os.environ, "HOME": str(tmp_path), "GIT_CONFIG_NOSYSTEM": "1"}
    env["GIT_CONFIG_GLOBAL"] = os.devnull
    proc = subprocess.run(
        [sys.executable, "-c", SCRIPT, str(root)],
        capture_output=True, text=True, env=env, timeout=120,
        start_new_session=True,  # its own group, so the SIGINT reaches only it and its git
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert proc.stdout.strip() == "recorded"
