"""An agent that asks an LLM for the next kernel.py and never lets a flaky provider end the night.

Transient failures are waited out for as long as they last (announced through `on_wait`, the
wait cut short when the loop asks to stop); unusable replies are sent back with what was wrong,
a few times, before the proposal is given up. Keys never appear in a message we emit.
"""

from __future__ import annotations

import random
import threading
import time
from collections.abc import Callable
from datetime import datetime

from autokernel.agents.base import AgentError, AgentStopped, Context, InvalidReply, Proposal
from autokernel.agents.prompt import build_messages, trim
from autokernel.agents.providers import Completion, Provider, TransientError
from autokernel.agents.replies import ReplyError, parse_reply, well_formed
from autokernel.secrets import redact as redact_secrets

STOP_POLL_S = 0.25  # how often stop() is asked while waiting
# The SDKs' timeout bounds each read, not the request: a server that sends a byte now and then
# held a night for as long as it liked. A request gets the provider's timeout in all, plus this.
DEADLINE_GRACE_S = 5.0
MIN_SECRET_CHARS = 6  # shorter "secrets" (placeholders) would redact ordinary words
TRUNCATED_HINT = (
    "Your reply was cut off at the output-token limit. Send SEARCH/REPLACE edits instead of "
    "the whole file to keep it short."
)


def _noop(message: str) -> None:
    pass


class LLMAgent:
    """The Agent protocol over any Provider."""

    def __init__(
        self,
        provider: Provider,
        name: str,
        *,
        max_reply_attempts: int = 3,
        backoff_base_s: float = 2.0,
        backoff_cap_s: float = 300.0,
        on_wait: Callable[[str], None] = _noop,
        stop: Callable[[], bool] = lambda: False,
        secrets: list[str] | None = None,
    ) -> None:
        self.provider = provider
        self.name = name
        self.max_reply_attempts = max(1, max_reply_attempts)
        self.backoff_base_s = backoff_base_s
        self.backoff_cap_s = backoff_cap_s
        self.on_wait = on_wait
        self.stop = stop
        self._secrets = sorted(
            {s for s in secrets or [] if len(s) >= MIN_SECRET_CHARS}, key=len, reverse=True
        )
        self._down_since: datetime | None = None  # first failure of the current outage
        self._failures = 0  # consecutive transient failures: the backoff exponent

    def propose(self, ctx: Context) -> Proposal:
        system, messages = build_messages(ctx)
        tokens = 0
        problem = ""
        for _ in range(self.max_reply_attempts):
            completion = self._complete(system, messages)
            tokens += completion.tokens
            text = well_formed(completion.text)  # it is sent back below, as UTF-8
            try:
                source, hypothesis = parse_reply(text, ctx.kernel_source, ctx.backends)
            except ReplyError as e:
                problem = f"{TRUNCATED_HINT}\n{e}" if completion.truncated else str(e)
                messages = [
                    *messages,
                    {"role": "assistant", "content": _echo(text)},
                    {"role": "user", "content": f"Your reply could not be used. {problem}"},
                ]
                continue
            return Proposal(source, hypothesis, tokens)
        raise InvalidReply(
            self.redact(f"no usable reply after {self.max_reply_attempts} attempts: {problem}"),
            tokens,
        )

    def redact(self, text: str) -> str:
        text = redact_secrets(text)
        for secret in self._secrets:
            text = text.replace(secret, "***")
        return text

    def _complete(self, system: str, messages: list[dict]) -> Completion:
        """One completion, waiting out transient failures for as long as they last."""
        while True:
            try:
                completion = self._within_deadline(system, messages)
            except TransientError as e:
                self._failures += 1
                self._down_since = self._down_since or datetime.now()
                delay = self._delay(e.retry_after)
                self.on_wait(
                    self.redact(
                        f"{self.name} unavailable ({e}); retrying in {_seconds(delay)} s"
                        f" — down since {self._down_since:%H:%M}"
                    )
                )
                self._sleep(delay)
                continue
            except AgentError as e:
                raise AgentError(self.redact(str(e))) from None
            self._failures, self._down_since = 0, None
            return completion

    def _within_deadline(self, system: str, messages: list[dict]) -> Completion:
        """provider.complete, given up (a TransientError) once the provider's timeout has passed
        in all, and cut short by stop(). A request given up goes on in its daemon thread until
        the server or the socket ends it; its reply, if any, is dropped."""
        timeout_s = getattr(self.provider, "timeout_s", None)
        if not isinstance(timeout_s, int | float):
            return self.provider.complete(system, messages)
        box: dict[str, object] = {}

        def request() -> None:
            try:
                box["done"] = self.provider.complete(system, messages)
            except BaseException as e:  # handed to the caller's thread below
                box["error"] = e

        worker = threading.Thread(target=request, name="llm-request", daemon=True)
        worker.start()
        deadline = time.monotonic() + timeout_s + DEADLINE_GRACE_S
        while worker.is_alive():
            if self.stop():
                raise AgentStopped(f"{self.name}: stopped while waiting for a reply")
            if time.monotonic() >= deadline:
                raise TransientError(f"no complete reply within {timeout_s:g} s")
            worker.join(STOP_POLL_S)
        if "error" in box:
            raise box["error"]  # type: ignore[misc]
        return box["done"]  # type: ignore[return-value]

    def _delay(self, retry_after: float | None) -> float:
        """The provider's Retry-After if it gave one, else exponential backoff with jitter
        (so many clients do not come back in step); both capped."""
        if retry_after is not None:
            return min(max(retry_after, 0.0), self.backoff_cap_s)
        exp = min(self.backoff_cap_s, self.backoff_base_s * 2 ** min(self._failures - 1, 30))
        return exp * random.uniform(0.5, 1.0)

    def _sleep(self, seconds: float) -> None:
        deadline = time.monotonic() + seconds
        while True:
            if self.stop():
                raise AgentStopped(f"{self.name}: stopped while waiting for the provider")
            left = deadline - time.monotonic()
            if left <= 0:
                return
            time.sleep(min(STOP_POLL_S, left))


def _seconds(delay: float) -> str:
    return f"{delay:.1f}" if delay < 10 else f"{delay:.0f}"


ECHO_CHARS = 8_000  # of an unusable reply sent back: its head and tail say what went wrong


def _echo(text: str) -> str:
    """An unusable reply as it goes back to the LLM with the reason: cut in the middle when
    long, so that a huge reply does not make every retry's request huge too."""
    return trim(text, ECHO_CHARS) if text else "(empty reply)"
