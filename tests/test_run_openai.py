"""An `openai` run end to end: the CLI, the official SDK over real HTTP to a scripted
OpenAI-compatible server on 127.0.0.1, the real harness. One run walks through what a night
with a real provider brings: rate limits, server errors, a timeout, a malformed reply, a broken
kernel and a real improvement."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from scripted_llm_server import Response, ScriptedLLMServer, reply

from autokernel.run.results import ResultsLog

ROOT = Path(__file__).resolve().parents[1]
KEY = "sk-test-5ecret-never-logged"
STARTER = (ROOT / "kernels" / "softmax.py").read_text()
# Fewer, fatter programs: under the CPU interpreter this is several times faster than the
# starter (measured ~30 ms -> ~6 ms at 64x1024), so the keep rule must keep it.
FASTER = STARTER.replace('"BLOCK_SIZE": 4096', '"BLOCK_SIZE": 65536').replace(
    '"ROWS_PER_PROGRAM": 16', '"ROWS_PER_PROGRAM": 64'
)
BROKEN_EDIT = """HYPOTHESIS: skip the normalisation, it is slow
<<<<<<< SEARCH
        y = e * (1.0 / tl.sum(e, axis=1))[:, None]
=======
        y = e
>>>>>>> REPLACE
"""
WARPS_EDIT = """HYPOTHESIS: four warps suffice for one row per program
<<<<<<< SEARCH
    "num_warps": 8,
=======
    "num_warps": 4,
>>>>>>> REPLACE
"""


@pytest.mark.slow
def test_openai_run_through_a_scripted_server(tmp_path):
    assert FASTER != STARTER
    ws = tmp_path / "ws"
    ws.mkdir()
    (ws / "autokernel.yaml").write_text("timeout_s: 2\n")
    script = [
        Response(429, "rate limited", {"Retry-After": "1"}),
        reply("I would make the blocks bigger."),  # malformed: no code
        reply(f"HYPOTHESIS: one program per 64 rows\n```python\n{FASTER}```\n"),
        Response(500, "internal error"),
        reply(BROKEN_EDIT),
        Response(200, "too late", delay_s=4.0),  # the client gives up after 2 s
        reply(WARPS_EDIT),
    ]
    with ScriptedLLMServer(script) as server:
        out = subprocess.run(
            [sys.executable, "-m", "autokernel.cli", "run", "--kernel", "softmax", "--agent",
             "openai", "--llm-model", "test-model", "--base-url", server.openai_url,
             "--max-experiments", "4", "--quick", "--quiet", "--workspace", str(ws)],
            capture_output=True, text=True, timeout=600,
            env={**os.environ, "OPENAI_API_KEY": KEY},
        )  # fmt: skip
        requests = server.requests
    assert out.returncode == 0, out.stdout + out.stderr
    rows = ResultsLog(ws / "results.tsv").read()
    assert [r["status"] for r in rows[:3]] == ["keep", "keep", "fail"]
    assert rows[3]["status"] in ("keep", "revert")
    assert rows[1]["agent"] == "openai:test-model" and int(rows[1]["tokens"]) > 0
    assert rows[1]["description"] == "one program per 64 rows"
    # the malformed reply was sent back with the error, then answered
    assert "code" in requests[2].text().lower() and "HYPOTHESIS" in requests[2].text()
    # Retry-After honoured; the 500 and the timeout were retried after a visible wait
    assert requests[1].at - requests[0].at >= 0.9
    log = (ws / ".autokernel" / "run.log").read_text()
    assert log.count("retrying in") >= 3
    # the broken kernel was reverted: the branch holds the improvement, not the broken edit
    kernel = (ws / "kernel.py").read_text()
    assert "y = e\n" not in kernel and '"BLOCK_SIZE": 65536' in kernel
    assert json.loads((ws / ".autokernel" / "state.json").read_text())["tokens"] > 0
    # the key went to the server and nowhere else
    assert any(KEY in json.dumps(r.headers) for r in requests)
    git_log = subprocess.run(["git", "log", "--all", "-p"], cwd=ws, capture_output=True,
                             text=True).stdout  # fmt: skip
    for text in (out.stdout, out.stderr, log, git_log, (ws / "results.tsv").read_text(),
                 (ws / ".autokernel" / "state.json").read_text()):  # fmt: skip
        assert KEY not in text
