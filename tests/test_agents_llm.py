"""The LLM agent over real HTTP: the official SDKs talk to a scripted server on 127.0.0.1, so
retries, waits, token counts and error mapping are checked end to end."""

from __future__ import annotations

import socket
import time

import pytest
from llm_agent_helpers import BAD, GOOD, KERNEL, KEY, clean_env, ctx, sent_key
from scripted_llm_server import Response, ScriptedLLMServer, openai_completion, reply

from autokernel.agents.base import AgentError, AgentStopped, InvalidReply
from autokernel.agents.llm import LLMAgent
from autokernel.agents.providers import AnthropicProvider, OpenAIProvider


@pytest.fixture(autouse=True)
def _clean_env(monkeypatch):
    clean_env(monkeypatch)


def openai_agent(server, *, timeout_s=5.0, **kw) -> LLMAgent:
    provider = OpenAIProvider("gpt-test", KEY, server.openai_url, timeout_s)
    kw.setdefault("backoff_base_s", 0.01)
    return LLMAgent(provider, "openai:gpt-test", secrets=[KEY], **kw)


def anthropic_agent(server, **kw) -> LLMAgent:
    provider = AnthropicProvider("claude-test", KEY, server.anthropic_url, 5.0, 1000)
    return LLMAgent(provider, "anthropic:claude-test", backoff_base_s=0.01, secrets=[KEY], **kw)


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


def test_a_lone_surrogate_in_a_reply_is_sent_back_and_written_as_utf8():
    """JSON may carry "\\ud800"; it cannot be encoded, so echoing the unusable reply made the
    SDK raise UnicodeEncodeError, and a usable one could not become kernel.py or a commit."""
    good = GOOD.replace("a wider block", "a wider\ud800 block").replace("=\n", "=\n# \udc80\n")
    with ScriptedLLMServer([reply(BAD + " \ud800"), reply(good)]) as server:
        proposal = openai_agent(server).propose(ctx())
    assert len(server.requests) == 2
    assert server.requests[1].body["messages"][2]["content"].endswith(" \ufffd")
    proposal.source.encode("utf-8")
    proposal.hypothesis.encode("utf-8")
    assert "# \ufffd\nCONFIG" in proposal.source and "\ufffd" in proposal.hypothesis


@pytest.mark.parametrize(
    "body",
    [b"<html>502 Bad Gateway</html>", b'{"choices": [{"message": {"content": "\xff\xfe"}}]}'],
    ids=["html", "not-utf8"],
)
def test_a_body_that_is_not_json_or_not_utf8_is_waited_out(body):
    """Both were raised by the SDK unwrapped (JSONDecodeError, UnicodeDecodeError): the night
    ended on one bad body from a gateway."""
    waits: list[str] = []
    with ScriptedLLMServer([Response(raw=body), reply(GOOD)]) as server:
        proposal = openai_agent(server, on_wait=waits.append).propose(ctx())
    assert proposal.hypothesis.startswith("a wider block")
    assert len(waits) == 1 and "was not valid" in waits[0]


def test_anthropic_body_that_is_not_json_is_waited_out():
    waits: list[str] = []
    with ScriptedLLMServer([Response(raw=b"\x00\xff not json"), reply(GOOD)]) as server:
        proposal = anthropic_agent(server, on_wait=waits.append).propose(ctx())
    assert proposal.hypothesis.startswith("a wider block") and len(waits) == 1


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


def test_a_huge_unusable_reply_goes_back_cut_in_the_middle():
    huge = BAD + "\n" + "z" * 50_000 + "\nTHE END"
    with ScriptedLLMServer([reply(huge), reply(GOOD)]) as server:
        openai_agent(server).propose(ctx())
    echoed = server.requests[1].body["messages"][-2]["content"]
    assert len(echoed) < 9_000 and echoed.startswith(BAD) and echoed.endswith("THE END")
    assert "characters cut" in echoed


def test_a_server_that_trickles_bytes_is_given_up_at_the_timeout():
    """Each byte within the SDK's read timeout, never done: the timeout bounds the request."""
    from autokernel.agents import llm

    waits: list[str] = []
    slow = Response(body=GOOD, trickle_s=0.5)
    with ScriptedLLMServer([slow, reply(GOOD)]) as server:
        start = time.monotonic()
        agent = openai_agent(server, timeout_s=1.0, on_wait=waits.append)
        agent.propose(ctx())
        elapsed = time.monotonic() - start
    assert len(waits) == 1 and "no complete reply within 1 s" in waits[0]
    assert elapsed < 1.0 + llm.DEADLINE_GRACE_S + 3.0
