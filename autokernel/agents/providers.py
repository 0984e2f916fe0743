"""Providers: one `complete(system, messages)` call to an LLM, its failures sorted in two kinds.

A TransientError (rate limit, overload, timeout, network) is waited out by the agent; an
AgentError (bad key, unknown model, rejected request, no such command) stops the run with a
message that says what to fix. The SDKs retry nothing themselves (max_retries=0): our policy
governs, so every wait is announced. The SDKs are optional extras, imported on first use.
"""

from __future__ import annotations

import contextlib
import email.utils
import json
import os
import shlex
import shutil
import signal
import subprocess
import time
from dataclasses import dataclass
from typing import Any, Protocol

from autokernel import DISTRIBUTION
from autokernel.agents.base import AgentError

MESSAGE_CHARS = 300  # provider error text kept in our messages
STDERR_TAIL_CHARS = 1000  # a failing command's stderr kept in the error


@dataclass(frozen=True)
class Completion:
    text: str
    tokens: int = 0  # billed tokens, prompt and reply together
    truncated: bool = False  # the reply hit the output-token limit


# What the SDKs raise, unwrapped, on a 200 whose body is not JSON (a gateway's HTML page) or
# not UTF-8 (bytes 0xff in a reply): the answer is lost, so the request is asked again.
UNDECODABLE = (json.JSONDecodeError, UnicodeDecodeError)


class TransientError(Exception):
    """The provider cannot answer now but may later; `retry_after` is its own hint, in s."""

    def __init__(self, message: str, retry_after: float | None = None) -> None:
        super().__init__(message)
        self.retry_after = retry_after


class Provider(Protocol):
    def complete(self, system: str, messages: list[dict]) -> Completion: ...


class OpenAIProvider:
    """Chat completions through the official `openai` SDK: OpenAI itself or any compatible
    server (vLLM, Ollama, llama.cpp, LM Studio, gateways) through `base_url`."""

    def __init__(self, model: str, api_key: str, base_url: str | None, timeout_s: float) -> None:
        try:
            import openai
        except ImportError:
            raise AgentError(
                "the openai agent needs the OpenAI SDK: pip install openai "
                f"(or pip install '{DISTRIBUTION}[openai]')"
            ) from None
        self.model = model
        self.timeout_s = timeout_s
        self._sdk = openai
        # base_url None lets the SDK read OPENAI_BASE_URL, as users of the SDK expect.
        try:
            self._client = openai.OpenAI(
                api_key=api_key, base_url=_http_url(base_url), timeout=timeout_s, max_retries=0
            )
        except openai.OpenAIError as e:
            raise AgentError(f"cannot set up the OpenAI client: {e}") from None
        self.base_url = str(self._client.base_url)

    def complete(self, system: str, messages: list[dict]) -> Completion:
        try:
            r = self._client.chat.completions.create(
                model=self.model, messages=[{"role": "system", "content": system}, *messages]
            )
        except self._sdk.OpenAIError as e:
            raise _map_sdk_error(e, self._sdk, self.base_url, self.timeout_s) from None
        except UNDECODABLE as e:
            raise _undecodable(e, self.base_url) from None
        # getattr throughout: "compatible" servers omit fields, and a missing one is no reason
        # to crash the night (an empty reply is sent back as unusable instead).
        tokens = getattr(getattr(r, "usage", None), "total_tokens", 0) or 0
        choices = getattr(r, "choices", None) or []
        if not choices:
            return Completion("", tokens)
        choice = choices[0]
        text = getattr(getattr(choice, "message", None), "content", None) or ""
        return Completion(text, tokens, getattr(choice, "finish_reason", None) == "length")


class AnthropicProvider:
    """The Messages API through the official `anthropic` SDK."""

    def __init__(
        self, model: str, api_key: str, base_url: str | None, timeout_s: float, max_tokens: int
    ) -> None:
        try:
            import anthropic
        except ImportError:
            raise AgentError(
                "the anthropic agent needs the Anthropic SDK: pip install anthropic "
                f"(or pip install '{DISTRIBUTION}[anthropic]')"
            ) from None
        self.model = model
        self.timeout_s = timeout_s
        self.max_tokens = max_tokens
        self._sdk = anthropic
        # An explicit timeout also keeps the SDK from refusing large max_tokens without streaming.
        try:
            self._client = anthropic.Anthropic(
                api_key=api_key, base_url=_http_url(base_url), timeout=timeout_s, max_retries=0
            )
        except anthropic.AnthropicError as e:
            raise AgentError(f"cannot set up the Anthropic client: {e}") from None
        self.base_url = str(self._client.base_url)

    def complete(self, system: str, messages: list[dict]) -> Completion:
        try:
            r = self._client.messages.create(
                model=self.model, max_tokens=self.max_tokens, system=system, messages=messages
            )
        except self._sdk.AnthropicError as e:
            raise _map_sdk_error(e, self._sdk, self.base_url, self.timeout_s) from None
        except UNDECODABLE as e:
            raise _undecodable(e, self.base_url) from None
        blocks = getattr(r, "content", None) or []
        text = "".join(b.text for b in blocks if getattr(b, "type", None) == "text")
        usage = getattr(r, "usage", None)
        tokens = sum(getattr(usage, k, 0) or 0 for k in ("input_tokens", "output_tokens"))
        return Completion(text, tokens, getattr(r, "stop_reason", None) == "max_tokens")


class CommandProvider:
    """Any program that reads a prompt on stdin and writes its reply on stdout (a local CLI
    agent, a script around another API). Trusted: the user chose it, so it keeps our
    environment; it runs in its own process group so a timeout kills all it started."""

    def __init__(self, command: str, timeout_s: float) -> None:
        try:
            self.argv = shlex.split(command)
        except ValueError as e:
            raise AgentError(f"cannot parse the agent command {command!r}: {e}") from None
        if not self.argv:
            raise AgentError("the agent command is empty; e.g. --agent-command 'my-agent --quiet'")
        if shutil.which(self.argv[0]) is None:
            raise AgentError(
                f"agent command not found: {self.argv[0]!r} (not on PATH, or not executable)"
            )
        self.timeout_s = timeout_s

    def complete(self, system: str, messages: list[dict]) -> Completion:
        proc = subprocess.Popen(
            self.argv,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            encoding="utf-8",
            errors="replace",
            start_new_session=True,
        )
        try:
            out, err = proc.communicate(render_prompt(system, messages), timeout=self.timeout_s)
        except subprocess.TimeoutExpired:
            _kill_group(proc)
            raise TransientError(
                f"{self.argv[0]} gave no reply within {self.timeout_s:g} s"
            ) from None
        except BaseException:  # Ctrl-C included: never leave the command running
            _kill_group(proc)
            raise
        if proc.returncode != 0:
            tail = err.strip()[-STDERR_TAIL_CHARS:] or "(no stderr)"
            raise TransientError(f"{self.argv[0]} exited with status {proc.returncode}: {tail}")
        return Completion(out)


def render_prompt(system: str, messages: list[dict]) -> str:
    """The conversation as one text, for programs that take a single prompt."""
    parts = [system]
    for m in messages:
        label = "Your previous reply" if m["role"] == "assistant" else "Request"
        parts.append(f"===== {label} =====\n{m['content']}")
    return "\n\n".join(parts)


def parse_retry_after(value: str | None) -> float | None:
    """Seconds to wait from a Retry-After header: delta-seconds or an HTTP date."""
    if not value:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    return max(0.0, when.timestamp() - time.time())


def _http_url(url: str | None) -> str | None:
    """A base URL the SDK can use; a typo must stop the run now, not be retried all night as a
    connection error."""
    if url is not None and not url.startswith(("http://", "https://")):
        raise AgentError(f"the base URL must start with http:// or https://, got {url!r}")
    return url


def _map_sdk_error(e: Exception, sdk: Any, base_url: str, timeout_s: float) -> Exception:
    """Sort an SDK exception (both SDKs share these class names) into transient or fatal."""
    if isinstance(e, sdk.APITimeoutError):
        return TransientError(f"no reply within {timeout_s:g} s")
    if isinstance(e, sdk.APIConnectionError):
        cause = e.__cause__ or e.__context__
        return TransientError(f"cannot connect to {base_url}: {cause or e}")
    if not isinstance(e, sdk.APIStatusError):
        return AgentError(f"the provider SDK failed: {e}")
    status, msg = e.status_code, _api_message(e)
    if status in (408, 409, 425, 429) or status >= 500:
        headers = e.response.headers
        retry_after = parse_retry_after(headers.get("retry-after"))
        if retry_after is None and headers.get("retry-after-ms"):
            retry_after = (parse_retry_after(headers.get("retry-after-ms")) or 0.0) / 1000
        return TransientError(f"HTTP {status}: {msg}", retry_after)
    if status in (401, 403):
        return AgentError(f"HTTP {status} from {base_url}: {msg}. Check your API key.")
    if status == 404:
        return AgentError(
            f"HTTP 404 from {base_url}: {msg}. Model not found or wrong base URL: check "
            "--llm-model and --base-url."
        )
    return AgentError(f"HTTP {status} from {base_url}: {msg}")


def _undecodable(e: Exception, base_url: str) -> TransientError:
    what = "UTF-8" if isinstance(e, UnicodeDecodeError) else "JSON"
    return TransientError(f"the reply from {base_url} was not valid {what}")


def _api_message(e: Any) -> str:
    """The provider's own words: the body's error message, else the body itself, trimmed."""
    msg = getattr(e, "api_message", None)
    body = e.body
    if not msg and isinstance(body, dict):
        inner = body.get("error", body)
        msg = inner.get("message") if isinstance(inner, dict) else inner
        msg = msg or json.dumps(body, default=str)
    if not msg and isinstance(body, str):
        msg = body
    text = " ".join(str(msg or e.message).split())
    return text if len(text) <= MESSAGE_CHARS else text[: MESSAGE_CHARS - 1] + "…"


def _kill_group(proc: subprocess.Popen) -> None:
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    proc.wait()
    for pipe in (proc.stdin, proc.stdout, proc.stderr):
        with contextlib.suppress(OSError):
            pipe.close()
