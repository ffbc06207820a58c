"""A real HTTP server on 127.0.0.1 speaking the OpenAI chat-completions protocol, for tests.

Start it in a thread (``with ChatServer() as srv: ... srv.base_url``) or as a process
(``python tests/_chat_server.py`` prints the base URL). Each request is answered by the next
scripted action, or by the default one when the script is empty:

    srv.script(Reply("a summary"), Status(503), Slow(2.0, "late"), Reply("x", finish_reason="length"))

Every request is recorded in ``srv.requests`` (path, lower-cased headers, parsed JSON body).
"""

from __future__ import annotations

import argparse
import json
import re
import socket
import threading
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

__all__ = ["ChatServer", "Hangup", "Raw", "Reply", "Slow", "Status", "echo_summary"]


@dataclass
class Reply:
    """A 200 chat completion with ``content`` (``None`` means a message without content)."""

    content: str | None
    finish_reason: str = "stop"
    delay: float = 0.0
    refusal: str | None = None


@dataclass
class Status:
    """An error status with an OpenAI-style error body; optional ``Retry-After`` in ms."""

    code: int
    message: str = "injected error"
    retry_after_ms: int | None = None
    headers: dict[str, str] = field(default_factory=dict)


@dataclass
class Slow:
    """Wait ``seconds`` before answering 200 with ``content`` (to trip client timeouts)."""

    seconds: float
    content: str = "slow summary"


@dataclass
class Hangup:
    """Close the connection without any response."""


@dataclass
class Raw:
    """Send ``body`` verbatim with ``status`` (for malformed responses)."""

    body: str
    status: int = 200


Action = Reply | Status | Slow | Hangup | Raw

_TOKEN_RE = re.compile(r"\S+")
# Data-looking words: contain a digit, '=', '/', '@' or '.' between letters.
_IDENT_RE = re.compile(r"[\w.:/@#=+-]*(?:\d|=|/|@)[\w.:/@#=+-]*")


def echo_summary(body: dict[str, Any]) -> str:
    """Default answer: a short 'summary' listing the identifiers in the last user message."""
    messages = body.get("messages") or []
    text = ""
    for msg in reversed(messages):
        if msg.get("role") == "user" and isinstance(msg.get("content"), str):
            text = msg["content"]
            break
    seen: list[str] = []
    for ident in _IDENT_RE.findall(text):
        ident = ident.strip(".,;:()`'\"")
        if len(ident) >= 3 and ident not in seen and not ident.startswith(("##", "http://127")):
            seen.append(ident)
    return "## Summary\n- " + "; ".join(seen[:40]) if seen else "## Summary\n- (nothing notable)"


class _Handler(BaseHTTPRequestHandler):
    server: _Server
    protocol_version = "HTTP/1.1"

    def log_message(self, format: str, *args: Any) -> None:
        pass  # keep test output clean

    def _send_json(self, status: int, payload: Any, headers: dict[str, str] | None = None) -> None:
        data = json.dumps(payload).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        for key, value in (headers or {}).items():
            self.send_header(key, value)
        self.end_headers()
        self.wfile.write(data)

    def do_GET(self) -> None:
        if self.path.rstrip("/").endswith("/models"):
            self._send_json(
                200, {"object": "list", "data": [{"id": "test-model", "object": "model"}]}
            )
        else:
            self._send_json(
                404, {"error": {"message": "not found", "type": "invalid_request_error"}}
            )

    def do_POST(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(length) if length else b""
        try:
            body = json.loads(raw or b"{}")
        except ValueError:
            self._send_json(
                400, {"error": {"message": "invalid JSON", "type": "invalid_request_error"}}
            )
            return
        srv = self.server.owner
        srv._record(self.path, {k.lower(): v for k, v in self.headers.items()}, body)
        if not self.path.rstrip("/").endswith("/chat/completions"):
            self._send_json(
                404,
                {"error": {"message": f"no route {self.path}", "type": "invalid_request_error"}},
            )
            return
        if not isinstance(body.get("messages"), list) or not body.get("model"):
            self._send_json(
                400,
                {
                    "error": {
                        "message": "model and messages are required",
                        "type": "invalid_request_error",
                    }
                },
            )
            return
        if body.get("stream"):
            self._send_json(
                400,
                {
                    "error": {
                        "message": "streaming is not supported here",
                        "type": "invalid_request_error",
                    }
                },
            )
            return
        action = srv._next_action(body)
        if isinstance(action, Hangup):
            self.close_connection = True
            try:
                self.connection.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
            return
        if isinstance(action, Raw):
            data = action.body.encode()
            self.send_response(action.status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)
            return
        if isinstance(action, Status):
            headers = dict(action.headers)
            if action.retry_after_ms is not None:
                headers["retry-after-ms"] = str(action.retry_after_ms)
            kind = {
                400: "invalid_request_error",
                401: "authentication_error",
                429: "rate_limit_error",
            }
            self._send_json(
                action.code,
                {
                    "error": {
                        "message": action.message,
                        "type": kind.get(action.code, "server_error"),
                        "code": None,
                    }
                },
                headers,
            )
            return
        if isinstance(action, Slow):
            if srv._wait(action.seconds):
                return  # server shutting down
            action = Reply(action.content)
        if action.delay and srv._wait(action.delay):
            return
        prompt_tokens = sum(
            len(_TOKEN_RE.findall(str(m.get("content") or ""))) for m in body["messages"]
        )
        completion_tokens = len(_TOKEN_RE.findall(action.content or ""))
        message: dict[str, Any] = {"role": "assistant", "content": action.content}
        if action.refusal is not None:
            message["refusal"] = action.refusal
        with srv._lock:
            srv._counter += 1
            n = srv._counter
        self._send_json(
            200,
            {
                "id": f"chatcmpl-test-{n}",
                "object": "chat.completion",
                "created": int(time.time()),
                "model": body["model"],
                "choices": [
                    {
                        "index": 0,
                        "message": message,
                        "finish_reason": action.finish_reason,
                        "logprobs": None,
                    }
                ],
                "usage": {
                    "prompt_tokens": prompt_tokens,
                    "completion_tokens": completion_tokens,
                    "total_tokens": prompt_tokens + completion_tokens,
                },
            },
        )


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True
    owner: ChatServer

    def handle_error(self, request: Any, client_address: Any) -> None:
        # A client that timed out and hung up before a slow answer is expected here.
        import sys

        exc = sys.exc_info()[1]
        if isinstance(exc, (BrokenPipeError, ConnectionResetError, ConnectionAbortedError)):
            return
        super().handle_error(request, client_address)


class ChatServer:
    """The loopback chat-completions server. Use as a context manager or start()/stop()."""

    def __init__(self, default: Callable[[dict[str, Any]], Action | str] | None = None) -> None:
        self.default = default or (lambda body: Reply(echo_summary(body)))
        self.requests: list[dict[str, Any]] = []
        self._script: deque[Action] = deque()
        self._lock = threading.Lock()
        self._stopping = threading.Event()
        self._counter = 0
        self._httpd: _Server | None = None
        self._thread: threading.Thread | None = None

    @property
    def port(self) -> int:
        assert self._httpd is not None, "server not started"
        return self._httpd.server_address[1]

    @property
    def base_url(self) -> str:
        """The OpenAI ``base_url`` for this server (``http://127.0.0.1:<port>/v1``)."""
        return f"http://127.0.0.1:{self.port}/v1"

    def script(self, *actions: Action) -> ChatServer:
        """Queue actions answering the next requests, in order."""
        with self._lock:
            self._script.extend(actions)
        return self

    def clear(self) -> None:
        with self._lock:
            self._script.clear()
            self.requests.clear()

    @property
    def chat_requests(self) -> list[dict[str, Any]]:
        with self._lock:
            return [r for r in self.requests if r["path"].rstrip("/").endswith("/chat/completions")]

    def _record(self, path: str, headers: dict[str, str], body: Any) -> None:
        with self._lock:
            self.requests.append(
                {"path": path, "headers": headers, "body": body, "time": time.monotonic()}
            )

    def _next_action(self, body: dict[str, Any]) -> Action:
        with self._lock:
            if self._script:
                return self._script.popleft()
        action = self.default(body)
        return Reply(action) if isinstance(action, str) else action

    def _wait(self, seconds: float) -> bool:
        """Sleep ``seconds``; True if the server is stopping meanwhile."""
        return self._stopping.wait(seconds)

    def start(self, port: int = 0) -> ChatServer:
        self._stopping.clear()
        self._httpd = _Server(("127.0.0.1", port), _Handler)
        self._httpd.owner = self
        self._thread = threading.Thread(
            target=self._httpd.serve_forever, name="chat-server", daemon=True
        )
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stopping.set()
        if self._httpd is not None:
            self._httpd.shutdown()
            self._httpd.server_close()
            self._httpd = None
        if self._thread is not None:
            self._thread.join(timeout=5)
            self._thread = None

    def __enter__(self) -> ChatServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--port", type=int, default=0)
    args = parser.parse_args()
    server = ChatServer().start(args.port)
    print(server.base_url, flush=True)
    try:
        while True:
            time.sleep(3600)
    except KeyboardInterrupt:
        server.stop()


if __name__ == "__main__":
    main()
