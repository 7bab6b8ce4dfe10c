"""A tiny in-process OpenAI-style streaming server that records every request it receives.

For what the simulator does not model: provider paths (Azure, Databricks), auth and custom
headers, and reasoning models (reasoning_content events, usage.completion_tokens_details).
"""

from __future__ import annotations

import json
import socket
from typing import Any, Self

import gevent
from gevent.pywsgi import WSGIHandler, WSGIServer

REASONING_EVENTS = 3
CONTENT_EVENTS = 2
EVENT_GAP_S = 0.02


class LoopbackServer:
    """A gevent server on 127.0.0.1 (a free port) while in its `with` block; `url` is its address."""

    _server: Any  # a started-on-enter gevent server, set by the subclass

    def __enter__(self) -> Self:
        self._server.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._server.stop(timeout=1)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self._server.server_port}"


class RecordingServer(LoopbackServer):
    """Serves on 127.0.0.1 (free port); `requests` lists {method, path, query, headers, body}."""

    def __init__(self) -> None:
        self.requests: list[dict[str, Any]] = []
        self._server = WSGIServer(("127.0.0.1", 0), self._app, log=None, error_log=None, handler_class=_NoDelayHandler)

    def _app(self, environ: dict[str, Any], start_response: Any) -> Any:
        length = int(environ.get("CONTENT_LENGTH") or 0)
        body = environ["wsgi.input"].read(length) if length else b""
        headers = {k[5:].replace("_", "-").lower(): v for k, v in environ.items() if k.startswith("HTTP_")}
        self.requests.append({"method": environ["REQUEST_METHOD"], "path": environ["PATH_INFO"],
                              "query": environ.get("QUERY_STRING", ""), "headers": headers,
                              "body": json.loads(body) if body else None})  # fmt: skip
        if environ["REQUEST_METHOD"] == "GET":
            start_response("200 OK", [("Content-Type", "application/json")])
            return [json.dumps({"data": [{"id": "recorded-model"}]}).encode()]
        start_response("200 OK", [("Content-Type", "text/event-stream")])
        return _events(self.requests[-1]["body"])


class _NoDelayHandler(WSGIHandler):
    """TCP_NODELAY on every connection: Nagle + delayed ACK would hold small events back ~40 ms."""

    def handle(self) -> None:
        self.socket.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        super().handle()


def _events(body: dict[str, Any]) -> Any:
    """Reasoning events, then content events, the usage chunk with reasoning tokens, [DONE]."""
    chat = "messages" in body
    for i in range(REASONING_EVENTS + CONTENT_EVENTS):
        gevent.sleep(EVENT_GAP_S)
        last = i == REASONING_EVENTS + CONTENT_EVENTS - 1
        if chat:
            delta = {"reasoning_content": f" think{i}"} if i < REASONING_EVENTS else {"content": f" word{i}"}
            choice = {"index": 0, "delta": delta, "finish_reason": "length" if last else None}
        else:
            choice = {"index": 0, "text": f" word{i}", "finish_reason": "length" if last else None}
        yield b"data: " + json.dumps({"choices": [choice]}).encode() + b"\n\n"
    n = REASONING_EVENTS + CONTENT_EVENTS
    usage = {"prompt_tokens": 7, "completion_tokens": n, "total_tokens": 7 + n,
             "completion_tokens_details": {"reasoning_tokens": REASONING_EVENTS}}  # fmt: skip
    yield b"data: " + json.dumps({"choices": [], "usage": usage}).encode() + b"\n\n"
    yield b"data: [DONE]\n\n"
