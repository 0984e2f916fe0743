"""The LLM agent over real HTTP: the official SDKs talk to a scripted server on 127.0.0.1, so
retries, waits, token counts and error mapping are checked end to end."""

from __future__ import annotations

import shlex
import socket
import sys
import time

import pytest
from scripted_llm_server import Response, ScriptedLLMServer, openai_completion, reply

from autokernel.agents.base import AgentError, AgentStopped, Context, InvalidReply
from autokernel.agents.factory import load_settings, make_agent
from autokernel.agents.llm import LLMAgent
from autokernel.agents.prompt import MAX_PROMPT_CHARS, build_messages
from autokernel.agents.providers import (
    AnthropicProvider,
    CommandProvider,
    OpenAIProvider,
    TransientError,
)

KEY = "sk-test-0123456789abcdef"
KERNEL = '''"""Row softmax."""

import torch

KERNEL_TYPE = "softmax"
CONFIG = {"BLOCK_SIZE": 1024}


def kernel_fn(x):
    return torch.softmax(x, dim=-1)
'''
GOOD = (
    "HYPOTHESIS: a wider block halves the number of programs\n"
    "<<<<<<< SEARCH\n"
    'CONFIG = {"BLOCK_SIZE": 1024}\n'
    "=======\n"
    'CONFIG = {"BLOCK_SIZE": 2048}\n'
    ">>>>>>> REPLACE\n"
)
BAD = "I think a bigger block would help."


@pytest.fixture(autouse=True)
def _clean_env(monkeypatch):
    """No real key, base URL or proxy from the developer's shell may leak into these tests."""
    for var in (
        "OPENAI_API_KEY",
        "OPENAI_BASE_URL",
        "ANTHROPIC_API_KEY",
        "ANTHROPIC_AUTH_TOKEN",
        "ANTHROPIC_BASE_URL",
    ):
        monkeypatch.delenv(var, raising=False)
    for var in ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY"):
        monkeypatch.delenv(var, raising=False)
        monkeypatch.delenv(var.lower(), raising=False)


def ctx(**kw) -> Context:
    base = dict(
        experiment=7,
        target="softmax",
        kernel_type="softmax",
        program="PLAYBOOK: make kernels fast.",
        spec_text="softmax(x: [rows, cols]) over the last dim",
        reference_source="def softmax(x):\n    return torch.softmax(x.float(), -1)\n",
        kernel_source=KERNEL,
    )
    return Context(**(base | kw))


def openai_agent(server, *, timeout_s=5.0, **kw) -> LLMAgent:
    provider = OpenAIProvider("gpt-test", KEY, server.openai_url, timeout_s)
    kw.setdefault("backoff_base_s", 0.01)
    return LLMAgent(provider, "openai:gpt-test", secrets=[KEY], **kw)


def anthropic_agent(server, **kw) -> LLMAgent:
    provider = AnthropicProvider("claude-test", KEY, server.anthropic_url, 5.0, 1000)
    return LLMAgent(provider, "anthropic:claude-test", backoff_base_s=0.01, secrets=[KEY], **kw)


def sent_key(request) -> str:
    """The key as sent: Anthropic's SDK has used both x-api-key and a bearer token."""
    return request.headers.get("x-api-key") or request.headers["authorization"].removeprefix(
        "Bearer "
    )


def closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


# OpenAI


@pytest.mark.slow
def test_openai_good_reply_becomes_a_proposal():
    with ScriptedLLMServer([reply(GOOD, prompt_tokens=300, completion_tokens=45)]) as server:
        proposal = openai_agent(server).propose(ctx())
    assert proposal.source == KERNEL.replace("1024", "2048")
    assert proposal.hypothesis == "a wider block halves the number of programs"
    assert proposal.tokens == 345
    [request] = server.requests
    assert request.headers["authorization"] == f"Bearer {KEY}"
    sent = request.body["messages"]
    assert sent[0] == {"role": "system", "content": "PLAYBOOK: make kernels fast."}
    assert KERNEL.strip() in sent[1]["content"] and request.body["model"] == "gpt-test"


def test_malformed_then_good_is_retried_with_the_error_and_tokens_summed():
    with ScriptedLLMServer([reply(BAD), reply(GOOD)]) as server:
        proposal = openai_agent(server).propose(ctx())
    assert proposal.tokens == 240
    second = server.requests[1].body["messages"]
    assert second[-2] == {"role": "assistant", "content": BAD}
    assert second[-1]["role"] == "user" and "holds no code" in second[-1]["content"]
    assert second[:2] == server.requests[0].body["messages"]


def test_truncated_reply_is_told_it_was_cut_off():
    cut = openai_completion("```python\nimport torch\n", finish="length")
    with ScriptedLLMServer([Response(body=cut), reply(GOOD)]) as server:
        openai_agent(server).propose(ctx())
    assert "cut off at the output-token limit" in server.requests[1].body["messages"][-1]["content"]


def test_three_malformed_replies_raise_invalid_reply_with_tokens():
    with ScriptedLLMServer([reply(BAD)] * 3 + [reply(GOOD)]) as server:
        with pytest.raises(InvalidReply, match=r"3 attempts.*no code") as e:
            openai_agent(server).propose(ctx())
    assert e.value.tokens == 360
    assert len(server.requests) == 3


@pytest.mark.slow
def test_429_honours_retry_after():
    waits: list[str] = []
    script = [Response(429, "rate limited", {"Retry-After": "1"}), reply(GOOD)]
    with ScriptedLLMServer(script) as server:
        proposal = openai_agent(server, on_wait=waits.append).propose(ctx())
    assert proposal.tokens == 120
    gap = server.requests[1].at - server.requests[0].at
    assert 0.9 <= gap < 3.0  # backoff_base_s is 0.01: only Retry-After explains a 1 s wait
    [message] = waits
    assert message.startswith("openai:gpt-test unavailable (HTTP 429: rate limited)")
    assert "retrying in 1.0 s — down since " in message


def test_500_then_success():
    waits: list[str] = []
    with ScriptedLLMServer([Response(500, "internal"), reply(GOOD)]) as server:
        proposal = openai_agent(server, on_wait=waits.append).propose(ctx())
    assert proposal.hypothesis.startswith("a wider block")
    assert len(waits) == 1 and "HTTP 500: internal" in waits[0]


@pytest.mark.slow
def test_timeout_then_success():
    waits: list[str] = []
    with ScriptedLLMServer([Response(delay_s=2.5, body=GOOD), reply(GOOD)]) as server:
        start = time.monotonic()
        openai_agent(server, timeout_s=1.0, on_wait=waits.append).propose(ctx())
        elapsed = time.monotonic() - start
    assert len(waits) == 1 and "no reply within 1 s" in waits[0]
    assert 0.9 <= elapsed < 2.4  # gave up at the timeout, not when the server answered


def test_401_is_fatal_and_mentions_the_key():
    with ScriptedLLMServer([Response(401, "Incorrect API key provided")]) as server:
        with pytest.raises(AgentError, match=r"HTTP 401.*Check your API key"):
            openai_agent(server).propose(ctx())
    assert len(server.requests) == 1


def test_404_names_model_and_base_url():
    with ScriptedLLMServer([Response(404, "The model gpt-test does not exist")]) as server:
        with pytest.raises(AgentError, match=r"does not exist.*Model not found or wrong base URL"):
            openai_agent(server).propose(ctx())


def test_base_url_without_scheme_is_fatal_at_start():
    with pytest.raises(AgentError, match="must start with http"):
        OpenAIProvider("gpt-test", KEY, "localhost:8000/v1", 5.0)


def test_connection_refused_waits_until_stopped():
    waits: list[str] = []
    provider = OpenAIProvider("gpt-test", KEY, f"http://127.0.0.1:{closed_port()}/v1", 2.0)
    agent = LLMAgent(
        provider,
        "openai:gpt-test",
        backoff_base_s=0.05,
        on_wait=waits.append,
        stop=lambda: len(waits) >= 3,
    )
    with pytest.raises(AgentStopped):
        agent.propose(ctx())
    assert len(waits) == 3
    assert all("cannot connect to http://127.0.0.1:" in w for w in waits)
    assert all("down since" in w for w in waits)


def test_stop_cuts_a_long_wait_short():
    stop_at = time.monotonic() + 0.3
    script = [Response(429, "busy", {"Retry-After": "60"})]
    with ScriptedLLMServer(script) as server:
        agent = openai_agent(server, stop=lambda: time.monotonic() > stop_at)
        start = time.monotonic()
        with pytest.raises(AgentStopped):
            agent.propose(ctx())
    assert time.monotonic() - start < 1.5


def test_backoff_grows_and_is_capped():
    script = [Response(503, "down")] * 4 + [reply(GOOD)]
    waits: list[str] = []
    with ScriptedLLMServer(script) as server:
        openai_agent(server, backoff_base_s=0.1, backoff_cap_s=0.3, on_wait=waits.append).propose(
            ctx()
        )
    delays = [float(w.split("retrying in ")[1].split(" s")[0]) for w in waits]
    assert len(delays) == 4
    assert 0.05 <= delays[0] <= 0.1 and all(d <= 0.3 for d in delays) and delays[3] >= 0.15


def test_secrets_are_redacted_from_waits_and_errors():
    waits: list[str] = []
    script = [Response(500, f"upstream rejected key {KEY}"), Response(400, f"bad key {KEY}")]
    with ScriptedLLMServer(script) as server:
        with pytest.raises(AgentError) as e:
            openai_agent(server, on_wait=waits.append).propose(ctx())
    assert "upstream rejected key ***" in waits[0] and KEY not in waits[0]
    assert "bad key ***" in str(e.value) and KEY not in str(e.value)


# Anthropic


@pytest.mark.slow
def test_anthropic_good_reply():
    script = [reply(GOOD, prompt_tokens=500, completion_tokens=60)]
    with ScriptedLLMServer(script) as server:
        proposal = anthropic_agent(server).propose(ctx())
    assert proposal.tokens == 560 and "2048" in proposal.source
    [request] = server.requests
    assert request.path == "/v1/messages"
    assert sent_key(request) == KEY
    assert request.body["system"] == "PLAYBOOK: make kernels fast."
    assert request.body["max_tokens"] == 1000 and request.body["messages"][0]["role"] == "user"


def test_anthropic_overloaded_and_500_are_waited_out():
    waits: list[str] = []
    script = [Response(529, "Overloaded"), Response(500, "oops"), reply(GOOD)]
    with ScriptedLLMServer(script) as server:
        anthropic_agent(server, on_wait=waits.append).propose(ctx())
    assert len(waits) == 2
    assert "HTTP 529: Overloaded" in waits[0] and "HTTP 500: oops" in waits[1]


def test_anthropic_odd_200_body_is_an_unusable_reply_not_a_crash():
    with ScriptedLLMServer([Response(body={"unexpected": True}), reply(GOOD)]) as server:
        proposal = anthropic_agent(server).propose(ctx())
    assert proposal.tokens == 120
    assert "(empty reply)" in server.requests[1].text()


def test_anthropic_403_is_fatal():
    with ScriptedLLMServer([Response(403, "forbidden")]) as server:
        with pytest.raises(AgentError, match="Check your API key"):
            anthropic_agent(server).propose(ctx())


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


# Prompt


def test_prompt_stays_bounded_over_a_long_night():
    rows = [
        {
            "experiment": str(i),
            "status": "keep" if i % 10 == 0 else "revert",
            "latency_us": f"{100 - i / 100:.2f}",
            "speedup_vs_eager": f"{1 + i / 1000:.3f}",
            "description": f"experiment number {i} " + "x" * 300,
        }
        for i in range(2000)
    ]
    rows[500]["speedup_vs_eager"] = "9.5"
    failure = "HEAD of the failure\n" + "noise " * 200_000 + "\nTAIL: the real error"
    system, messages = build_messages(ctx(history=rows, last_failure=failure))
    request = messages[0]["content"]
    assert len(system) + len(request) <= MAX_PROMPT_CHARS
    assert KERNEL.strip() in request
    assert "1999 | revert" in request and "experiment number 1999" in request
    assert "experiment number 1000 " not in request  # old rows only as counts
    assert "1985 earlier experiments (1786 revert, 199 keep); best of them: 500 |" in request
    assert "HEAD of the failure" in request and "TAIL: the real error" in request


def test_kernel_is_never_cut():
    big = KERNEL + "".join(f"# filler line {i:06d} " + "y" * 60 + "\n" for i in range(1500))
    rows = [{"experiment": str(i), "status": "fail", "description": "d"} for i in range(100)]
    _, messages = build_messages(ctx(kernel_source=big, history=rows, last_failure="@" * 50_000))
    request = messages[0]["content"]
    assert big.strip() in request
    # Everything else gave way down to the last budget: one row, 500 characters of failure.
    assert "99 | fail" in request and "98 | fail" not in request
    assert request.count("@") <= 500


def test_prompt_lists_the_configs_that_ran_out_of_resources():
    big = {"BLOCK_M": 256, "num_stages": 5}
    _, messages = build_messages(ctx(oversized_configs=[big]))
    text = messages[-1]["content"]
    assert "ran out of shared memory" in text and '"BLOCK_M": 256' in text
    _, messages = build_messages(ctx())
    assert "ran out of shared memory" not in messages[-1]["content"]
