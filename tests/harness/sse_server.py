"""A raw-socket server on 127.0.0.1 for responses the simulator does not give (stalls, keep-alive comments, a
connection closed between requests): each handler writes the HTTP response bytes itself."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from gevent.server import StreamServer

HEADERS = b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n\r\n"
"""The head of a chunked server-sent-events response."""


def chunk(data: bytes, extension: bytes = b"") -> bytes:
    """`data` as one HTTP/1.1 chunk (with the chunk `extension`, e.g. b";name=value")."""
    return b"%x%s\r\n%s\r\n" % (len(data), extension, data)


def serve(handler: Callable[[Any, Any], None]) -> StreamServer:
    """A started server on a free loopback port calling `handler(socket, address)` per connection (stop it)."""
    server = StreamServer(("127.0.0.1", 0), handler)
    server.start()
    return server


def read_request(sock: Any) -> bool:
    """Read one request (headers and body); False when the client closed the connection."""
    data = b""
    while b"\r\n\r\n" not in data:
        more = sock.recv(65536)
        if not more:
            return False
        data += more
    head, _, body = data.partition(b"\r\n\r\n")
    length = int(next(h for h in head.split(b"\r\n") if h.lower().startswith(b"content-length")).split(b":")[1])
    while len(body) < length:
        more = sock.recv(65536)
        if not more:  # the client left mid-body: reading on would spin the hub (recv returns b"" at once)
            return False
        body += more
    return True


def never_answer(sock: Any, _address: Any) -> None:
    """A handler that reads what the client sends and never answers, until the client closes the connection."""
    while sock.recv(65536):
        pass
