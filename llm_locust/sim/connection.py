"""The simulator's connections: one `asyncio.Protocol` per client connection, and the listening socket whose
accepted sockets keep the kernel's receive time of what they read.

Every accepted socket gets TCP_NODELAY. Requests on a connection are answered in order (keep-alive and
pipelining); each is handed to the app (`server.SimApp`), which answers it through the connection.
"""

from __future__ import annotations

import asyncio
import socket
import ssl
from asyncio.sslproto import SSLProtocol
from collections import deque
from collections.abc import Callable
from time import perf_counter
from typing import Any, Protocol

from llm_locust.sim import http
from llm_locust.sim.apis.wire import ApiError
from llm_locust.sim.receive_time import SO_TIMESTAMPNS, StampedRecv
from llm_locust.sim.stream import Generation, reset_connection
from llm_locust.sim.trace import TraceRecord


class App(Protocol):
    """What a connection hands its requests to (`server.SimApp`)."""

    connections: set[SimConnection]

    def handle(self, request: http.Request, conn: SimConnection, t_recv_s: float) -> None:
        """Answer `request`, received at `t_recv_s` (perf_counter s), through `conn`."""

    def abandoned(self, record: TraceRecord) -> None:
        """The client of the held-back request of `record` went away before it started."""

    def cancel(self, generation: Generation) -> None:
        """The client of `generation` went away before its end."""


class Upgraded(Protocol):
    """What a connection switched to another protocol hands every read to (`websocket.ApiSocket`)."""

    def received(self, data: bytes, t_read_s: float) -> None:
        """`data`, read at `t_read_s` (perf_counter s: the kernel's receive time where kept)."""


class StampedSocket(StampedRecv, socket.socket):
    """A connection's socket whose `recv` (what asyncio's transport reads with) also keeps the
    kernel's receive time of what it read: `t_arrival_s`.

    So a request's `t_recv` is when its bytes reached this host, not when the event loop —
    busy writing other streams' tokens — came round to read them: the TTFT the simulator
    reports (first token write − t_recv) then leaves out no time the client could measure.
    """

    __slots__ = ("t_arrival_s",)


class StampedListener(socket.socket):
    """A listening socket whose accepted connections are `StampedSocket`s."""

    __slots__ = ()

    def accept(self) -> tuple[StampedSocket, Any]:
        fd, address = self._accept()  # type: ignore[attr-defined]
        conn = StampedSocket(self.family, self.type, self.proto, fileno=fd)
        conn.setsockopt(socket.SOL_SOCKET, SO_TIMESTAMPNS, 1)
        conn.t_arrival_s = perf_counter()
        return conn, address


def listener(host: str, port: int) -> StampedListener:
    """A bound, listening, non-blocking `StampedListener` on `host`:`port` (0: any free port)."""
    family, kind, proto, _name, address = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)[0]
    sock = StampedListener(family, kind, proto)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.setsockopt(socket.SOL_SOCKET, SO_TIMESTAMPNS, 1)  # from now on the kernel stamps what arrives
    sock.bind(address)
    sock.listen(4096)
    sock.setblocking(False)
    return sock


class DelayedStart(asyncio.Protocol):
    """A new connection left unread for `delay_s` after its accept (`--accept-delay-ms`), then served by the protocol
    `connection()` makes — over TLS with `tls`, whose handshake starts only then (the ClientHello waits, as the
    first request of a plain connection does)."""

    def __init__(self, connection: Callable[[], SimConnection], delay_s: float, tls: ssl.SSLContext | None) -> None:
        self._connection, self._delay_s, self._tls = connection, delay_s, tls

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        transport.pause_reading()  # type: ignore[attr-defined]
        asyncio.get_running_loop().call_later(self._delay_s, self._start, transport, perf_counter())

    def _start(self, transport: Any, t_accept_s: float) -> None:
        if transport.is_closing():  # the client went away meanwhile
            return
        connection = self._connection()
        connection.accept_delay_s = perf_counter() - t_accept_s  # as served: the timer wakes a little late
        protocol: asyncio.Protocol = connection
        if self._tls is not None:  # TLS over the transport, as create_server(ssl=...) sets it up (sslproto)
            protocol = SSLProtocol(asyncio.get_running_loop(), protocol, self._tls, None, server_side=True)
        transport.set_protocol(protocol)
        protocol.connection_made(transport)
        transport.resume_reading()

    def data_received(self, data: bytes) -> None:  # reading is paused until the start: nothing comes here
        pass


class SimConnection(asyncio.Protocol):
    """One client connection: parses requests and answers them one at a time, in order."""

    def __init__(self, app: App) -> None:
        self.app = app
        self.transport: asyncio.Transport = None  # type: ignore[assignment]
        self.generation: Generation | None = None
        self._parser = http.RequestParser()
        self._queued: deque[http.Request] = deque()
        self._closing = False
        self._delayed: tuple[asyncio.TimerHandle, TraceRecord] | None = None  # a held-back request
        self._stamped: StampedSocket | None = None  # the socket, when it keeps kernel receive times
        self._t_first_s = 0.0  # when the first byte of the request being read arrived (perf_counter s)
        self.upgraded: Upgraded | None = None  # the protocol the connection switched to (WebSocket), if any
        self.accept_delay_s = 0.0  # held unread after its accept (`DelayedStart`), until its first request's trace

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        """Set TCP_NODELAY (no Nagle delay on small SSE writes) and register the connection."""
        self.transport = transport  # type: ignore[assignment]
        sock = transport.get_extra_info("socket")
        if sock is not None:
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            inner = getattr(sock, "_sock", None)  # asyncio wraps the socket in a TransportSocket
            self._stamped = inner if isinstance(inner, StampedSocket) else None
        self.app.connections.add(self)

    def data_received(self, data: bytes) -> None:
        """Parse `data`; dispatch each completed request unless one is still being answered. A request is received
        where a server's clock starts, at the read that brought its first byte (a large body's upload, and this
        loop's time on other connections meanwhile, are the server's); `Request.t_body_s`: the read that completed
        it."""
        t_read_s = perf_counter() if self._stamped is None else self._stamped.t_arrival_s
        if self.upgraded is not None:
            self.upgraded.received(data, t_read_s)
            return
        t_first_s = t_read_s if self._parser.idle else self._t_first_s
        try:
            requests = self._parser.feed(data)
        except http.HttpError as exc:
            self._closing = True
            body = ApiError(exc.status, "BadRequestError", exc.message).body()
            head = http.response_head(exc.status, "application/json", content_length=len(body), keep_alive=False)
            self.transport.write(head + body)
            self.transport.close()
            return
        if self._parser.awaiting_continue:
            self._parser.awaiting_continue = False
            self.transport.write(http.CONTINUE)
        self._t_first_s = t_read_s if requests else t_first_s  # what is left of the data began in this read, or before
        for i, request in enumerate(requests):  # a pipelined request after the first began in this read
            request.t_body_s = t_read_s
            if self.generation is None and self._delayed is None and not self._queued and not self._closing:
                self.app.handle(request, self, t_first_s if i == 0 else t_read_s)
            else:
                self._queued.append(request)

    def respond(
        self,
        request: http.Request,
        status: int,
        body: bytes,
        content_type: str = "application/json",
        extra: tuple[str, ...] = (),
    ) -> None:
        """Write a complete response to `request` now (`extra`: further header lines)."""
        keep_alive = request.keep_alive
        head = http.response_head(status, content_type, content_length=len(body), keep_alive=keep_alive, extra=extra)
        self.transport.write(head + body)
        self.response_done(keep_alive)

    def delay(self, delay_s: float, record: TraceRecord, start: Callable[[], None]) -> None:
        """Hold the current request back for `delay_s`, then call `start()` to answer it."""

        def wake() -> None:
            self._delayed = None
            start()

        self._delayed = (asyncio.get_running_loop().call_later(delay_s, wake), record)

    def reset(self) -> None:
        """Drop the connection with a TCP reset, answering nothing."""
        self._closing = True
        self._queued.clear()
        reset_connection(self.transport)

    def response_done(self, keep_alive: bool) -> None:
        """The current response is fully written: close, or answer the next queued request."""
        self.generation = None
        if not keep_alive:
            self._closing = True
            self._queued.clear()
            self.transport.close()
            return
        if self._queued and self.generation is None:
            self.app.handle(self._queued.popleft(), self, perf_counter())

    def connection_lost(self, exc: Exception | None) -> None:
        """Cancel an unfinished generation (the trace records it as cancelled)."""
        self._closing = True
        self._queued.clear()
        self.app.connections.discard(self)
        if self._delayed is not None:
            handle, record = self._delayed
            self._delayed = None
            handle.cancel()
            self.app.abandoned(record)
        if self.generation is not None:
            generation, self.generation = self.generation, None
            self.app.cancel(generation)
