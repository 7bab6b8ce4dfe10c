"""A tiny in-process HTTP proxy on 127.0.0.1 that records what it is asked: CONNECT tunnels (for
https:// targets) and absolute-form requests (for http:// targets), as a corporate proxy gets them."""

from __future__ import annotations

from urllib.parse import urlsplit

import gevent
from gevent import socket as gsocket
from gevent.server import StreamServer

from harness.recording_server import LoopbackServer
from harness.tap import pipe


class RecordingProxy(LoopbackServer):
    """`requests`: the request line and headers (lower-case names) of each request it got;
    `refuse`: a status line to answer every request with instead (e.g. b"HTTP/1.1 407 ...")."""

    def __init__(self, refuse: bytes = b"") -> None:
        self.requests: list[tuple[str, dict[str, str]]] = []
        self.refuse = refuse
        self._server = StreamServer(("127.0.0.1", 0), self._handle)

    def _handle(self, client: gsocket.socket, _address: object) -> None:
        data = b""
        while b"\r\n\r\n" not in data:
            more = client.recv(65536)
            if not more:
                return
            data += more
        head, _, rest = data.partition(b"\r\n\r\n")
        line, *fields = head.decode("latin-1").split("\r\n")
        headers = {name.strip().lower(): value.strip() for name, _, value in (f.partition(":") for f in fields)}
        self.requests.append((line, headers))
        method, target, version = line.split(" ")
        if self.refuse:
            client.sendall(self.refuse + b"\r\nContent-Length: 0\r\nConnection: close\r\n\r\n")
            return
        if method == "CONNECT":
            host, _, port = target.rpartition(":")
            upstream = gsocket.create_connection((host, int(port)))
            client.sendall(b"HTTP/1.1 200 Connection established\r\n\r\n")
        else:  # absolute form: one request per connection, to the origin in origin form
            url = urlsplit(target)
            upstream = gsocket.create_connection((url.hostname, url.port or 80))
            kept = [f for f in fields if not f.lower().startswith(("connection:", "proxy-"))]
            path = url.path + (f"?{url.query}" if url.query else "")
            request_head = "\r\n".join([f"{method} {path} {version}", *kept, "Connection: close"])
            upstream.sendall(request_head.encode("latin-1") + b"\r\n\r\n")
        if rest:
            upstream.sendall(rest)
        gevent.joinall([gevent.spawn(pipe, client, upstream), gevent.spawn(pipe, upstream, client)])
        upstream.close()
