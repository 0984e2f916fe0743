"""Making an agent: the factory (its kinds, the model, keys from the environment or
autokernel.yaml) and the command provider, a local program that gets the prompt on stdin."""

from __future__ import annotations

import shlex
import sys
import time

import pytest
from llm_agent_helpers import GOOD, KERNEL, KEY, clean_env, ctx, sent_key
from scripted_llm_server import Response, ScriptedLLMServer, reply

from autokernel.agents.base import AgentError
from autokernel.agents.factory import load_settings, make_agent
from autokernel.agents.llm import LLMAgent
from autokernel.agents.providers import CommandProvider, TransientError


@pytest.fixture(autouse=True)
def _clean_env(monkeypatch):
    clean_env(monkeypatch)


# Command


def python_command(tmp_path, body: str) -> str:
    script = tmp_path / "agent.py"
    script.write_text(body)
    return shlex.join([sys.executable, str(script)])


def test_command_provider_gets_the_prompt_on_stdin(tmp_path):
    seen = tmp_path / "prompt.txt"
    command = python_command(
        tmp_path,
        "import pathlib, sys\n"
        f"pathlib.Path({str(seen)!r}).write_text(sys.stdin.read())\n"
        f"print({GOOD!r})\n",
    )
    agent = LLMAgent(CommandProvider(command, 10.0), "command:python")
    proposal = agent.propose(ctx())
    assert "2048" in proposal.source and proposal.tokens == 0
    prompt = seen.read_text()
    assert prompt.startswith("PLAYBOOK: make kernels fast.") and KERNEL.strip() in prompt


def test_failing_command_is_transient_with_stderr(tmp_path):
    command = python_command(
        tmp_path, "import sys\nsys.stderr.write('quota exhausted')\nsys.exit(3)\n"
    )
    with pytest.raises(TransientError, match="exited with status 3: quota exhausted"):
        CommandProvider(command, 10.0).complete("system", [{"role": "user", "content": "x"}])


def test_hung_command_times_out(tmp_path):
    command = python_command(tmp_path, "import time\ntime.sleep(30)\n")
    start = time.monotonic()
    with pytest.raises(TransientError, match=r"no reply within 0.5 s"):
        CommandProvider(command, 0.5).complete("system", [])
    assert time.monotonic() - start < 5


def test_missing_command_fails_at_construction():
    with pytest.raises(AgentError, match="not found: 'no-such-agent-xyz'"):
        CommandProvider("no-such-agent-xyz --flag", 10.0)


# Factory


def make(kind, settings=None, **kw):
    args = dict(llm_model="m-test", base_url=None, agent_command=None)
    args |= kw
    return make_agent(kind, settings=settings or {}, on_wait=print, stop=lambda: False, **args)


def test_missing_key_fails_at_start():
    with pytest.raises(
        AgentError, match=r"set OPENAI_API_KEY or openai_api_key in autokernel.yaml"
    ):
        make("openai")
    with pytest.raises(AgentError, match="set ANTHROPIC_API_KEY or anthropic_api_key"):
        make("anthropic", base_url="http://localhost:8000")


def test_local_base_url_needs_no_key():
    with ScriptedLLMServer([reply(GOOD)]) as server:
        agent = make("openai", base_url=server.openai_url)
        assert agent.name == "openai:m-test"
        assert agent.propose(ctx()).tokens == 120
    assert server.requests[0].headers["authorization"].startswith("Bearer ")


def test_key_from_autokernel_yaml(tmp_path):
    (tmp_path / "autokernel.yaml").write_text(f"openai_api_key: {KEY}\nllm_model: from-yaml\n")
    settings = load_settings(tmp_path)
    with ScriptedLLMServer([Response(500, f"echo {KEY}"), reply(GOOD)]) as server:
        waits: list[str] = []
        agent = make_agent(
            "openai",
            llm_model=None,
            base_url=server.openai_url,
            agent_command=None,
            settings=settings,
            on_wait=waits.append,
            stop=lambda: False,
        )
        agent.backoff_base_s = 0.01
        agent.propose(ctx())
    assert agent.name == "openai:from-yaml"
    assert server.requests[0].headers["authorization"] == f"Bearer {KEY}"
    assert KEY not in waits[0]  # the factory registered the key for redaction


def test_environment_key_wins_over_yaml(monkeypatch):
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-from-environment")
    with ScriptedLLMServer([reply(GOOD)]) as server:
        agent = make("anthropic", {"anthropic_api_key": KEY}, base_url=server.anthropic_url)
        agent.propose(ctx())
    assert sent_key(server.requests[0]) == "sk-from-environment"
    assert agent.name == "anthropic:m-test"


def test_unknown_kind_lists_the_kinds():
    with pytest.raises(AgentError, match="tuner, openai, anthropic, command"):
        make("gemini")


def test_missing_model_and_command_are_explained(monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", KEY)
    with pytest.raises(AgentError, match="--llm-model gpt-5"):
        make("openai", llm_model=None)
    with pytest.raises(AgentError, match="--agent-command"):
        make("command")
    agent = make("command", agent_command=shlex.join([sys.executable, "-c", "pass"]))
    assert agent.name == f"command:{sys.executable.rsplit('/', 1)[-1]}"


def test_tuner_kind():
    assert make("tuner").name == "tuner"


def test_malformed_yaml_names_file_and_line(tmp_path):
    path = tmp_path / "autokernel.yaml"
    path.write_text("llm_model: gpt-5\nbase_url: [unclosed\n")
    with pytest.raises(AgentError, match=rf"{path}:\d+: not valid YAML"):
        load_settings(path)
    path.write_text("- just\n- a list\n")
    with pytest.raises(AgentError, match="expected `key: value` lines"):
        load_settings(path)
    assert load_settings(tmp_path / "absent.yaml") == {}


def test_binary_settings_file_is_a_message_not_a_traceback(tmp_path):
    path = tmp_path / "autokernel.yaml"
    path.write_bytes(b"\xff\xfe\x00agent: tuner\n")  # garbage, or a UTF-16 file
    with pytest.raises(AgentError, match=rf"{path}: not UTF-8 text"):
        load_settings(path)
