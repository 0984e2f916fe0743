"""A scripted LLM server on 127.0.0.1: just enough of OpenAI's /v1/chat/completions and
Anthropic's /v1/messages for the official SDKs to talk to it over real HTTP.

Each request takes the next scripted Response (status, a JSON body or plain reply text,
headers, a delay before answering) and is recorded, so tests assert both what the agent did and
what it sent. An exhausted script answers 500 with "script exhausted", which tests will notice.

    script = [Response(429, "slow down", {"Retry-After": "1"}), reply("HYPOTHESIS: ...")]
    with ScriptedLLMServer(script) as server:
        OpenAIProvider("m", "key", server.openai_url, 5.0).complete(system, messages)
"""

from __future__ import annotations

import json
import threading
import time
from collections import deque
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

OPENAI_PATH = "/v1/chat/completions"
ANTHROPIC_PATH = "/v1/messages"


@dataclass
class Response:
    """One scripted answer. `body`: a dict is sent as JSON; a str becomes a normal completion
    (status 200) or the API's error body (other statuses), in the format of the path asked."""

    status: int = 200
    body: dict[str, Any] | str = ""
    headers: dict[str, str] = field(default_factory=dict)
    delay_s: float = 0.0
    prompt_tokens: int = 100
    completion_tokens: int = 20
    raw: bytes | None = None  # sent as the body byte for byte, instead of `body` (not JSON...)
    trickle_s: float = 0.0  # > 0: the body goes out one byte per this many seconds


@dataclass
class Request:
    path: str
    headers: dict[str, str]
    body: dict[str, Any]
    at: float  # time.monotonic() on arrival

    def text(self) -> str:
        """Everything the client sent as conversation text (system and messages)."""
        return json.dumps(self.body)


def reply(text: str, **kw: Any) -> Response:
    """A normal completion holding `text`."""
    return Response(200, text, **kw)


def openai_completion(
    text: str, prompt_tokens: int = 100, completion_tokens: int = 20, finish: str = "stop"
) -> dict[str, Any]:
    return {
        "id": "chatcmpl-scripted",
        "object": "chat.completion",
        "created": int(time.time()),
        "model": "scripted",
        "choices": [
            {
                "index": 0,
                "message": {"role": "assistant", "content": text},
                "finish_reason": finish,
            }
        ],
        "usage": {
            "prompt_tokens": prompt_tokens,
            "completion_tokens": completion_tokens,
            "total_tokens": prompt_tokens + completion_tokens,
        },
    }


def anthropic_message(
    text: str, input_tokens: int = 100, output_tokens: int = 20, stop: str = "end_turn"
) -> dict[str, Any]:
    return {
        "id": "msg_scripted",
        "type": "message",
        "role": "assistant",
        "model": "scripted",
        "content": [{"type": "text", "text": text}],
        "stop_reason": stop,
        "stop_sequence": None,
        "usage": {"input_tokens": input_tokens, "output_tokens": output_tokens},
    }


def error_body(path: str, status: int, message: str) -> dict[str, Any]:
    if path == ANTHROPIC_PATH:
        kind = "overloaded_error" if status == 529 else "api_error"
        return {"type": "error", "error": {"type": kind, "message": message}}
    return {"error": {"message": message, "type": "error", "code": str(status)}}


class ScriptedLLMServer:
    def __init__(self, script: list[Response] | None = None) -> None:
        self.script: deque[Response] = deque(script or [])
        self.requests: list[Request] = []
        self._lock = threading.Lock()
        self._httpd = ThreadingHTTPServer(("127.0.0.1", 0), _handler(self))
        self._httpd.daemon_threads = True
        self._httpd.block_on_close = False  # a handler still sleeping must not hold up close
        self._thread = threading.Thread(target=self._httpd.serve_forever, daemon=True)

    @property
    def url(self) -> str:
        host, port = self._httpd.server_address[:2]
        return f"http://{host}:{port}"

    @property
    def openai_url(self) -> str:
        return self.url + "/v1"

    @property
    def anthropic_url(self) -> str:
        return self.url

    def add(self, *responses: Response) -> None:
        with self._lock:
            self.script.extend(responses)

    def __enter__(self) -> ScriptedLLMServer:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._httpd.shutdown()
        self._httpd.server_close()

    def _next(self, request: Request) -> Response:
        with self._lock:
            self.requests.append(request)
            if self.script:
                return self.script.popleft()
        return Response(500, "script exhausted")


def _handler(server: ScriptedLLMServer) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def do_POST(self) -> None:
            length = int(self.headers.get("Content-Length") or 0)
            raw = self.rfile.read(length)
            try:
                body = json.loads(raw or b"{}")
            except ValueError:
                body = {"_raw": raw.decode("utf-8", "replace")}
            path = self.path.split("?")[0]
            headers = {k.lower(): v for k, v in self.headers.items()}
            request = Request(path, headers, body, time.monotonic())
            if path in (OPENAI_PATH, ANTHROPIC_PATH):
                r = server._next(request)
            else:
                server.requests.append(request)
                r = Response(404, f"no such path {path}")
            if r.delay_s:
                time.sleep(r.delay_s)
            payload = r.raw if r.raw is not None else json.dumps(self._body(path, r)).encode()
            try:
                self.send_response(r.status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(payload)))
                for k, v in r.headers.items():
                    self.send_header(k, v)
                self.end_headers()
                if not r.trickle_s:
                    self.wfile.write(payload)
                for i in range(len(payload) if r.trickle_s else 0):  # each byte within the
                    self.wfile.write(payload[i : i + 1])  # client's read timeout, never done
                    self.wfile.flush()
                    time.sleep(r.trickle_s)
            except OSError:  # the client gave up (timeout) and closed the connection
                self.close_connection = True

        def _body(self, path: str, r: Response) -> dict[str, Any]:
            if isinstance(r.body, dict):
                return r.body
            if r.status != 200:
                return error_body(path, r.status, r.body)
            if path == ANTHROPIC_PATH:
                return anthropic_message(r.body, r.prompt_tokens, r.completion_tokens)
            return openai_completion(r.body, r.prompt_tokens, r.completion_tokens)

        def log_message(self, format: str, *args: Any) -> None:
            pass  # keep pytest output clean

    return Handler
