"""The simulator's WebSocket connections: an API served over WebSocket (`wire.Api.websocket`: the OpenAI Realtime API)
takes the connection over once its GET with `Upgrade: websocket` is answered.

The handshake and the framing are wsproto's (a sans-io library: no home-made framing). The request the HTTP parser
read is handed to wsproto as its head (`_head`), which checks it and writes the `101 Switching Protocols`; from then on
every read of the connection goes to wsproto, and each text message it completes is handed to the API's `Session` with
the kernel's receive time of the read that completed it. A session answers with `send` (one text message) or writes
frames it made with `frame` itself — a generation's token events (`ApiSocket.generate`: the timing model, the trace
and the metrics of any other response, each event one text message written as the model produces its token). Pings
are answered; a close is answered and closes the connection (an unfinished generation is cancelled, as a client that
goes away from an HTTP stream).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Protocol

from wsproto import ConnectionType, WSConnection
from wsproto.events import AcceptConnection, CloseConnection, Ping, Request, TextMessage
from wsproto.utilities import LocalProtocolError, RemoteProtocolError

from llm_locust.sim import http
from llm_locust.sim.apis import BY_NAME
from llm_locust.sim.apis.wire import Api, ApiError, CompletionSpec, Encoder
from llm_locust.sim.config import SimConfig
from llm_locust.sim.connection import SimConnection
from llm_locust.sim.drivers import Driver
from llm_locust.sim.faults import ON_WEBSOCKET, FaultPicker
from llm_locust.sim.stream import FaultGeneration, Generation
from llm_locust.sim.trace import TraceRecord
from llm_locust.sim.words import word_offset

EncoderFactory = Callable[[CompletionSpec, str, int, str, int], Encoder]
"""(spec, response id, created s, model, first word's offset) → the response's `Encoder` (as `wire.Api.encoder`)."""


class Host(Protocol):
    """What a WebSocket needs of the app (`server.SimApp`): its settings, and its trace records, timing model and
    trace for a generation."""

    config: SimConfig
    faults: FaultPicker
    driver: Driver

    def new_record(self, api: Api, spec: CompletionSpec, t_recv_s: float) -> TraceRecord: ...

    def submit(self, conn: SimConnection, generation: Generation) -> None: ...

    def finished(self, generation: Generation) -> None: ...


class Session(Protocol):
    """An API's side of one WebSocket (`wire.Api.websocket` makes it)."""

    def start(self) -> None:
        """The handshake is answered: write the session's first events."""

    def message(self, text: str, t_recv_s: float) -> None:
        """A text message from the client, whose last byte arrived at `t_recv_s` (perf_counter s)."""


class Writer(Protocol):
    """The part of `asyncio.Transport` a socket writes to."""

    def write(self, data: bytes) -> None: ...

    def close(self) -> None: ...


class ApiSocket:
    """One upgraded connection `conn` of `app` (see the module doc): `served` models, the server's natural output
    length (`natural_tokens`), `query` (the upgrade request's query string), `session` (the API's, set by `upgrade`)."""

    def __init__(self, app: Host, conn: SimConnection, request: http.Request) -> None:
        self._app, self._conn = app, conn
        self.transport = conn.transport
        self.query = request.query
        self.served = app.config.served
        self.natural_tokens = app.config.output_tokens
        self.session: Session | None = None
        self._ws = WSConnection(ConnectionType.SERVER)
        self._parts: list[str] = []  # the fragments of a text message not complete yet
        self._ws.receive_data(_head(request))
        if not any(isinstance(event, Request) for event in self._ws.events()):
            raise ApiError(400, "BadRequestError", "not a WebSocket upgrade request")

    def accept(self) -> None:
        """Answer the handshake: `101 Switching Protocols`."""
        self.transport.write(self._ws.send(AcceptConnection()))

    def frame(self, text: str) -> bytes:
        """`text` as one WebSocket text message's bytes (unmasked, as a server's are)."""
        return self._ws.send(TextMessage(data=text))

    def send(self, text: str) -> None:
        """Write `text` as one text message now."""
        self.transport.write(self.frame(text))

    def generate(
        self, spec: CompletionSpec, encoder: EncoderFactory, t_recv_s: float, on_done: Callable[[TraceRecord], None]
    ) -> TraceRecord:
        """Start generating `spec` (of the API `spec.endpoint` names, its request received at `t_recv_s`): its events
        made by `encoder`, each token's written as the timing model produces it, traced and counted as any response's;
        `on_done(record)` once it is finished (not when the client went away first). Its trace record."""
        app, conn = self._app, self._conn
        record = app.new_record(BY_NAME[spec.endpoint], spec, t_recv_s)
        events = encoder(spec, record.id, int(time.time()), spec.model, word_offset(record.id))

        def done(generation: Generation) -> None:
            app.finished(generation)
            if not record.cancelled:
                conn.generation = None
                on_done(record)

        args = (self.transport, spec, record, events)
        fault = app.faults.pick() if app.faults.active else None
        if fault in ON_WEBSOCKET and spec.output_tokens >= 1:  # mid-stream, as any stream's (`faults`)
            config = app.config
            generation: Generation = FaultGeneration(
                *args, chunked=False, keep_alive=True, on_done=done, fault=fault, release=app.driver.cancel,
                stall_s=config.fault_stall_ms / 1e3, huge_bytes=config.fault_huge_bytes,
            )  # fmt: skip
        else:
            generation = Generation(*args, chunked=False, keep_alive=True, on_done=done)
        app.submit(conn, generation)
        return record

    def received(self, data: bytes, t_read_s: float) -> None:
        """Bytes the client sent, read at `t_read_s`: each completed text message goes to the session."""
        ws = self._ws
        try:
            ws.receive_data(data or None)  # b"": the end of input
            for event in ws.events():
                if isinstance(event, TextMessage):
                    self._parts.append(event.data)
                    if event.message_finished and self.session is not None:
                        text, self._parts = "".join(self._parts), []
                        self.session.message(text, t_read_s)
                elif isinstance(event, Ping):
                    self.transport.write(ws.send(event.response()))
                elif isinstance(event, CloseConnection):
                    self.transport.write(ws.send(event.response()))
                    self.transport.close()
                    return
        except (LocalProtocolError, RemoteProtocolError):  # a bad frame: the connection cannot go on
            self.transport.close()


def upgrade(app: Host, request: http.Request, conn: SimConnection, api: Api) -> None:
    """Switch `conn` to WebSocket for `api`'s session; ApiError (426) unless `request` asks to (or the API's own refusal
    of it, before the handshake is answered)."""
    if not is_upgrade(request):
        raise ApiError(426, "BadRequestError", f"{request.path} is served over WebSocket: GET with Upgrade: websocket")
    socket = ApiSocket(app, conn, request)
    session = api.websocket(socket)  # type: ignore[misc]
    socket.accept()
    socket.session = session
    conn.upgraded = socket
    session.start()


def is_upgrade(request: http.Request) -> bool:
    """True when `request` asks to switch to WebSocket."""
    return request.method == "GET" and request.headers.get("upgrade", "").lower() == "websocket"


def _head(request: http.Request) -> bytes:
    """`request`'s head again, as wsproto reads a handshake (the HTTP parser has read it already)."""
    target = f"{request.path}?{request.query}" if request.query else request.path
    lines = [f"{request.method} {target} {request.version}"]
    lines += [f"{name}: {value}" for name, value in request.headers.items()]
    return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1")
