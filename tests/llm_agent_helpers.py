"""What the LLM agent tests share: a kernel, a good and a bad reply, the context an agent is
asked in, and an environment with no real key, base URL or proxy in it."""

from __future__ import annotations

from autokernel.agents.base import Context

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


def clean_env(monkeypatch) -> None:
    """No real key, base URL or proxy from the developer's shell may leak into these tests, and
    no key another test registered (a config file's key, read by the agent factory) either: the
    process-wide mask would then stand where an agent's own "***" is expected."""
    from autokernel import secrets

    monkeypatch.setattr(secrets, "_registered", set())
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


def sent_key(request) -> str:
    """The key as sent: Anthropic's SDK has used both x-api-key and a bearer token."""
    return request.headers.get("x-api-key") or request.headers["authorization"].removeprefix(
        "Bearer "
    )
