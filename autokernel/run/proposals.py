"""Asking the agent for several proposals at once, each told what the others are evaluating.

An instant agent (the tuner: `instant = True`) is asked inline, one proposal per free slot, so
each proposal sees the freshest best kernel and the configs already in flight. Any other agent
(an LLM behind a provider, a command) is asked in threads, up to the pool's width at once: a
completion takes tens of seconds, and the slots should not wait for it one request at a time.
Each request carries the in-flight list in its Context (agents/prompt.py shows it), so
concurrent requests aim at different hypotheses.
"""

from __future__ import annotations

import queue
import threading
from dataclasses import dataclass, field

from autokernel.agents.base import Agent, Context, Proposal
from autokernel.run.state import Score


@dataclass
class Ticket:
    """One request: the context it was asked with and the best it was derived from."""

    target: str
    context: Context
    base_commit: str | None  # the target's best kernel when asked
    base_score: Score | None
    outcome: Proposal | BaseException | None = None  # set when answered
    done: bool = False


@dataclass
class Proposer:
    agent: Agent
    _answers: queue.Queue[Ticket] = field(default_factory=queue.Queue)
    asking: list[Ticket] = field(default_factory=list)  # sent, not yet collected

    @property
    def instant(self) -> bool:
        return bool(getattr(self.agent, "instant", False))

    def ask(self, ticket: Ticket) -> Ticket | None:
        """Send the request; an instant agent's answer comes back at once, else via poll()."""
        if self.instant:
            self._answer(ticket)
            return ticket
        self.asking.append(ticket)
        threading.Thread(target=self._threaded, args=(ticket,), daemon=True).start()
        return None

    def _answer(self, ticket: Ticket) -> None:
        try:
            ticket.outcome = self.agent.propose(ticket.context)
        except (Exception, RecursionError, MemoryError) as exc:  # the caller sorts them out
            ticket.outcome = exc
        ticket.done = True

    def _threaded(self, ticket: Ticket) -> None:
        self._answer(ticket)
        self._answers.put(ticket)

    def poll(self) -> list[Ticket]:
        """Answers that arrived since the last call, in arrival order."""
        out = []
        while True:
            try:
                ticket = self._answers.get_nowait()
            except queue.Empty:
                break
            self.asking.remove(ticket)
            out.append(ticket)
        return out

    def asking_for(self, target: str) -> int:
        return sum(t.target == target for t in self.asking)
