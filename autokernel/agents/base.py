"""The agent protocol: given what the loop knows, propose the next kernel.py.

Every agent (the built-in tuner, an LLM behind any provider, an external command) answers the
same question from the same context, so the loop never knows which one it is talking to.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Protocol


@dataclass(frozen=True)
class Context:
    """What an agent may see when proposing experiment `experiment` on `target`."""

    experiment: int  # the number the proposal will be committed under
    target: str  # e.g. "softmax" or "rmsnorm_1" (a plan may hold several of one type)
    kernel_type: str
    program: str  # program.md: the playbook
    spec_text: str  # signature, shapes (real ones from the plan first), dtype, tolerances
    reference_source: str  # the oracle's source in reference.py
    kernel_source: str  # the current best kernel.py of this target
    history: list[dict[str, str]] = field(default_factory=list)  # results rows, oldest first
    last_failure: str | None = None  # stage, size, dtype, error, compiler output of the last fail
    roofline: str = ""  # best latency, throughput, % of peak, speedups, in words
    tried_configs: list[dict] = field(default_factory=list)  # CONFIGs already evaluated here
    oversized_configs: list[dict] = field(default_factory=list)  # out of resources, or spilled
    # With parallel workers: proposals of this target being evaluated now ({experiment,
    # hypothesis, config}), and how many other requests are being answered beside this one.
    # `experiment` is then provisional: numbers are assigned in the order the replies arrive.
    in_flight: list[dict] = field(default_factory=list)
    others_asking: int = 0
    backends: tuple[str, ...] = ("triton",)  # the BACKEND values this run allows (--backend)
    other_starter: str = ""  # the starter of the backend it may switch to; "" when none


@dataclass(frozen=True)
class Proposal:
    source: str  # the complete new kernel.py
    hypothesis: str  # one line: what should get faster and why
    tokens: int = 0  # tokens the provider billed for this proposal (retries included)


class AgentError(Exception):
    """The agent cannot work at all (no key, bad model name, no such command): stop the run
    with this message, which says what to do."""


class InvalidReply(Exception):
    """The agent's reply stayed unusable after its retries (no code, edits that do not apply,
    not Python). Nothing is committed; `tokens` were still spent."""

    def __init__(self, message: str, tokens: int = 0) -> None:
        super().__init__(message)
        self.tokens = tokens


class AgentStopped(Exception):
    """The agent was waiting (provider down, backing off) when the loop asked it to stop:
    budget spent or Ctrl-C. Not an error: the run ends normally."""


class Agent(Protocol):
    name: str  # goes into results.tsv's agent column, e.g. "tuner" or "openai:gpt-5"

    def propose(self, ctx: Context) -> Proposal | None:
        """The next kernel.py, or None when this agent has nothing left to try on the target."""
        ...
