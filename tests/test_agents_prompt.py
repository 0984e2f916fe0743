"""The LLM agent's prompt: bounded over a long night, the kernel never cut, and the configs
that ran out of resources listed."""

from __future__ import annotations

import pytest
from llm_agent_helpers import KERNEL, clean_env, ctx

from autokernel.agents.prompt import MAX_PROMPT_CHARS, build_messages


@pytest.fixture(autouse=True)
def _clean_env(monkeypatch):
    clean_env(monkeypatch)


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
