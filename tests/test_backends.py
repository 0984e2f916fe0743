"""--backend triton|cuda|any: starters, what agents are told and allowed, the results column."""

from __future__ import annotations

import subprocess

import pytest
import torch
from loop_helpers import ScriptedAgent, make_loop
from typer.testing import CliRunner

from autokernel import backends
from autokernel.agents.prompt import build_request
from autokernel.agents.replies import ReplyError, parse_reply
from autokernel.cli import app
from autokernel.run import briefing
from autokernel.run.results import ResultsLog
from autokernel.run.state import load

TRITON = """KERNEL_TYPE = "softmax"
BACKEND = "triton"
CONFIG = {}


def kernel_fn(x):
    return x
"""


def test_choices_and_what_each_allows():
    assert backends.parse(None) == "triton" and backends.parse("ANY") == "any"
    with pytest.raises(backends.BackendError, match="triton, cuda, any"):
        backends.parse("opencl")
    assert backends.allowed("any", on_gpu=True) == ("triton", "cuda")
    assert backends.allowed("any", on_gpu=False) == ("triton",)  # no GPU: nothing builds CUDA
    assert backends.allowed("cuda", on_gpu=True) == ("cuda",)


def test_cuda_runs_are_refused_without_a_gpu_or_a_starter():
    with pytest.raises(backends.BackendError, match="needs an NVIDIA GPU"):
        backends.check("cuda", ["rmsnorm"], on_gpu=False)
    with pytest.raises(backends.BackendError, match="no CUDA starter for flash_attention"):
        backends.check("cuda", ["rmsnorm", "flash_attention"], on_gpu=True)
    backends.check("cuda", ["rmsnorm", "matmul"], on_gpu=True)
    backends.check("any", ["flash_attention"], on_gpu=True)  # any: flash_attention stays Triton


def test_starters_and_the_backend_a_file_declares():
    assert backends.starter_path("softmax", "cuda").name == "softmax.py"
    assert backends.starter_path("softmax", "cuda").parent.name == "cuda"
    assert backends.of_source(backends.starter_path("softmax", "cuda").read_text()) == "cuda"
    assert backends.of_source("KERNEL_TYPE = 'softmax'\n") == "triton"
    assert backends.start_backend("any") == "triton" and backends.start_backend("cuda") == "cuda"


def test_a_reply_switching_backend_is_refused_unless_the_run_allows_it():
    cuda = TRITON.replace('BACKEND = "triton"', 'BACKEND = "cuda"')
    reply = f"HYPOTHESIS: CUDA\n```python\n{cuda}```\n"
    with pytest.raises(ReplyError, match='allows BACKEND = "triton"'):
        parse_reply(reply, TRITON, ("triton",))
    source, _ = parse_reply(reply, TRITON, ("triton", "cuda"))
    assert backends.of_source(source) == "cuda"


def test_any_tells_the_agent_it_may_switch_and_shows_the_other_starter():
    text = backends.briefing("any", "softmax", on_gpu=True)
    assert 'BACKEND = "triton" or "cuda"' in text and "section CUDA" in text
    other = backends.other_starter("any", "softmax", "triton", on_gpu=True)
    assert 'BACKEND = "cuda"' in other and "CUDA_SOURCE" in other
    assert backends.other_starter("triton", "softmax", "triton", on_gpu=True) == ""
    assert "keep BACKEND" in backends.briefing("any", "softmax", on_gpu=False)


def test_the_prompt_carries_the_backend_line_and_the_other_starter(tmp_path):
    loop, _ = make_loop(tmp_path, agent=ScriptedAgent([]), max_experiments=1)
    loop.state.backend = "any"
    ts = loop.state.targets[0]
    ctx = briefing.context(loop.state, ts, TRITON, [], on_gpu=True)
    assert ctx.backends == ("triton", "cuda")
    request = build_request(ctx)
    assert "backend: your choice" in request
    assert "shipped starter of the other backend" in request and "CUDA_SOURCE" in request


def _cuda_version(source: str):
    return source.replace('BACKEND = "triton"', 'BACKEND = "cuda"'), "switch to CUDA", 5


def test_the_loop_refuses_a_proposal_in_a_backend_the_run_does_not_allow(tmp_path):
    loop, harness = make_loop(tmp_path, agent=ScriptedAgent([_cuda_version]), max_experiments=2)
    loop.run()
    rows = ResultsLog(tmp_path / "results.tsv").read()
    assert [r["status"] for r in rows] == ["keep", "invalid"]
    assert "BACKEND 'cuda'" in rows[1]["description"]
    assert len(harness.evaluated) == 1  # only the starter was evaluated


def test_rows_carry_the_evaluated_kernels_backend(tmp_path):
    loop, _ = make_loop(tmp_path, agent=ScriptedAgent([]), max_experiments=1)
    loop.run()
    (row,) = ResultsLog(tmp_path / "results.tsv").read()
    assert row["backend"] == "-"  # the fake harness's verdicts name none; the real one does
    assert load(tmp_path).backend == "triton"


NO_GPU_HERE = pytest.mark.skipif(torch.cuda.is_available(), reason="this machine has a GPU")


@NO_GPU_HERE
def test_run_with_cuda_on_a_machine_without_a_gpu_is_one_line_exit_2(tmp_path):
    subprocess.run(["git", "init", "-q", str(tmp_path)], check=True)
    result = CliRunner().invoke(
        app, ["run", "--kernel", "rmsnorm", "--backend", "cuda", "--workspace", str(tmp_path)]
    )
    assert result.exit_code == 2
    said = " ".join(result.output.split())  # the terminal may wrap a long path
    assert "needs an NVIDIA GPU" in said and "Traceback" not in said


@NO_GPU_HERE
def test_bench_of_a_cuda_starter_without_a_gpu_is_one_line_exit_2():
    result = CliRunner().invoke(app, ["bench", "--kernel", "rmsnorm", "--backend", "cuda"])
    assert result.exit_code == 2
    said = " ".join(result.output.split())  # the terminal may wrap a long path
    assert "needs an NVIDIA GPU" in said and "Traceback" not in said


def test_the_switch_agent_replies_with_the_other_starter_and_the_reply_parses(tmp_path):
    """benchmarks/switch_agent.py, the GPU's LLM-free switch test, on the prompt an `any` run
    builds: its reply parses under the run's rule and makes kernel.py the CUDA starter."""
    import sys
    from pathlib import Path

    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))
    import switch_agent

    loop, _ = make_loop(tmp_path, agent=ScriptedAgent([]), max_experiments=1)
    loop.state.backend = "any"
    ts = loop.state.targets[0]
    current = (tmp_path / "kernel.py").read_text()
    ctx = briefing.context(loop.state, ts, current, [], on_gpu=True)
    text = switch_agent.reply(build_request(ctx))
    source, hypothesis = parse_reply(text, current, ctx.backends)
    assert source == backends.starter_path("softmax", "cuda").read_text()
    assert "cuda starter" in hypothesis
    assert switch_agent.reply("no such section") is None
