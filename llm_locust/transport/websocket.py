"""A WebSocket client connection (the Realtime API's): TCP with the kernel's receive times (`patches.StampedSocket`),
TLS decrypted in memory (`tls_memory.TLSConnection`) for `wss://`, wsproto's handshake and framing (sans-io: no
home-made framing), its frames read by the process's `StreamPump` as any stream's body (`StreamPump.read_socket`).

Each text message the server sends reaches the reader's `on_message` with the kernel receive time of the read that
completed it (a message in the same read as the handshake's answer: that read's). Messages that arrive after the one
the reader waited for are kept for the next read, with their times. Pings are answered; the server's close ends the
connection (`ConnectionResetError`, its code and reason).
"""

from __future__ import annotations

import contextlib
import socket
import ssl
from collections import deque
from collections.abc import Callable, Mapping
from time import perf_counter
from typing import Any
from urllib.parse import urlsplit

import gevent
import orjson
from wsproto import ConnectionType, WSConnection
from wsproto.events import AcceptConnection, CloseConnection, Ping, RejectConnection, RejectData, Request, TextMessage
from wsproto.utilities import LocalProtocolError, RemoteProtocolError

from llm_locust.metrics.protocol import finish
from llm_locust.metrics.record import ErrorKind, RequestRecord
from llm_locust.transport import pump
from llm_locust.transport.auth import RequestAuth
from llm_locust.transport.byte_arrival import READ_BYTES
from llm_locust.transport.kernel_time import connect_rtt_s
from llm_locust.transport.patches import StampedSocket
from llm_locust.transport.request import NextSend
from llm_locust.transport.timeouts import RequestTimeout, TimeoutWatchdog, Watch
from llm_locust.transport.tls_memory import TLSConnection

Applier = Callable[[RequestRecord, bytes, float], bool]
"""An API's reader of one server event (a text message's bytes, its arrival) into a record: True once it is over."""
OnMessage = Callable[[str, float], bool]
"""A reader of text messages: (the message, its arrival, perf_counter s) → True once it has what it waits for."""


_BROKEN = frozenset({1002, 1007, 1009})
"""Close codes of a broken stream: a protocol error, a text message that is not UTF-8, a message too big."""


class BadFrame(ValueError):
    """A frame that breaks the WebSocket protocol: the connection is closed (its close code and reason)."""


class HandshakeRefused(ConnectionError):
    """The server answered the upgrade with an HTTP status (`status`) and `body`, not a WebSocket."""

    def __init__(self, status: int, body: bytes) -> None:
        super().__init__(f"HTTP {status}: {body[:300].decode(errors='replace')}")
        self.status = status


class WebSocket:
    """A connected WebSocket to `url` (`ws://` / `http://`, `wss://` / `https://`; `headers`: the upgrade request's,
    auth included; `context`: TLS's, for wss; `next_send_s`: the process's next send due, by which the pump's turns
    end, `pump.turn_end`). `connect_s`, `tls_handshake_s`: the set-up's times, seconds."""

    def __init__(
        self,
        url: str,
        headers: dict[str, str],
        context: ssl.SSLContext | None = None,
        timeout_s: float = 30.0,
        next_send_s: NextSend = pump.no_sends,
    ) -> None:
        self.next_send_s = next_send_s
        parts = urlsplit(url)
        secure = parts.scheme in ("wss", "https")
        host = parts.hostname or "127.0.0.1"
        port = parts.port or (443 if secure else 80)
        family, kind, proto, _name, address = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)[0]
        sock = StampedSocket(family, kind, proto)
        sock.settimeout(timeout_s)
        t_start = perf_counter()
        sock.connect(address)
        sock.connect_s = connect_rtt_s(sock) or perf_counter() - t_start
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.connect_s = sock.connect_s
        self.tls_handshake_s: float | None = None
        self.conn: Any = sock
        if secure:
            self.conn = TLSConnection(sock, context or ssl.create_default_context(), host)
            self.tls_handshake_s = self.conn.tls_handshake_s
        self._ws = WSConnection(ConnectionType.CLIENT)
        self._pending: deque[tuple[str, float]] = deque()  # messages read, not handed to a reader yet
        self._parts: list[str] = []  # the fragments of a text message not complete yet
        target = parts.path + (f"?{parts.query}" if parts.query else "")
        request = Request(host=parts.netloc, target=target or "/", extra_headers=list(headers.items()))
        self.conn.sendall(self._ws.send(request))
        self._handshake()

    def _handshake(self) -> None:
        """Read the server's answer to the upgrade: accepted, or `HandshakeRefused`."""
        refused: RejectConnection | None = None
        body = b""
        while True:
            data = self.conn.recv(READ_BYTES)
            self._ws.receive_data(data or None)
            for event in self._ws.events():
                if isinstance(event, AcceptConnection):
                    self._take(self._ws.events(), self.conn.t_arrival_s or perf_counter())
                    return
                if isinstance(event, RejectConnection):
                    refused = event
                    if not event.has_body:
                        raise HandshakeRefused(event.status_code, b"")
                elif isinstance(event, RejectData):
                    body += event.data
                    if event.body_finished and refused is not None:
                        raise HandshakeRefused(refused.status_code, body)
            if not data:
                raise ConnectionResetError("the server closed the connection during the WebSocket handshake")

    def send(self, event: dict[str, Any]) -> None:
        """Send `event` as one text message (JSON)."""
        self.conn.sendall(self._ws.send(TextMessage(data=orjson.dumps(event).decode())))

    @property
    def t_sent_s(self) -> float:
        """When the last message's last byte was handed to the kernel, perf_counter s."""
        return self.conn.t_sent_s

    def read(self, on_message: OnMessage, watch: Watch) -> None:
        """Hand each text message to `on_message`, with its arrival time, until it returns True (see the module doc)."""
        pending = self._pending
        while pending:
            if on_message(*pending.popleft()):
                return
        done = False

        def on_bytes(data: bytes | bytearray, t: float) -> bool:
            nonlocal done
            self._ws.receive_data(bytes(data))
            for text, t_text in self._take(self._ws.events(), t):
                if done:
                    pending.append((text, t_text))
                else:
                    done = on_message(text, t_text)
            return done

        if pump.reads_sockets():
            pump.pump(self.next_send_s).read_socket(self.conn, on_bytes, watch)
            return
        while not done:  # (no epoll or no kernel receive times: read here)
            data = self.conn.recv(READ_BYTES)
            if not data:
                raise ConnectionResetError("the server closed the connection")
            t = self.conn.t_arrival_s or perf_counter()
            watch.t_active_s = t
            on_bytes(data, t)

    def _take(self, events: Any, t: float) -> list[tuple[str, float]]:
        """The text messages `events` (wsproto's) complete, each with `t`; pings answered; the server's close raised."""
        messages = []
        for event in events:
            if isinstance(event, TextMessage):
                self._parts.append(event.data)
                if event.message_finished:
                    messages.append(("".join(self._parts), t))
                    self._parts = []
            elif isinstance(event, Ping):
                self.conn.sendall(self._ws.send(event.response()))
            elif isinstance(event, CloseConnection):
                if event.code in _BROKEN:  # wsproto read a frame that breaks the protocol (or a server said so)
                    raise BadFrame(f"{event.code} {event.reason or ''}")
                raise ConnectionResetError(f"the server closed the WebSocket: {event.code} {event.reason or ''}")
        return messages

    def exchange(
        self,
        events: list[dict[str, Any]],
        record: RequestRecord,
        apply: Applier,
        watchdog: TimeoutWatchdog,
        keep: Callable[[bytes], None] | None = None,
        pace: Callable[[dict[str, Any]], float] | None = None,
    ) -> RequestRecord:
        """One exchange: send `events`, the last one asking for the answer (`t_send`: right before it is handed to the
        kernel), then apply the server's events to `record` (`apply`, the API's; `keep`, when given, gets each one's
        bytes first) until it says the answer is over — its arrival is the record's end (`t_done`); `watchdog`'s
        timeouts as any request's. `pace`: the seconds of media an event carries — each is sent once its media is
        recorded, at real-time pace from the first (a microphone's), the rest right after. The finished record."""
        record.t_send = perf_counter()  # (the timeouts count from here; taken again as the answer is asked for)
        watch = watchdog.start(record)
        t_done = 0.0

        def on_message(text: str, t: float) -> bool:
            nonlocal t_done
            data = text.encode()
            if keep is not None:
                keep(data)
            if apply(record, data, t):
                t_done = t
                return True
            return False

        try:
            t_recorded_s = perf_counter()
            for event in events[:-1]:
                if pace is not None and (media_s := pace(event)):
                    t_recorded_s += media_s
                    gevent.sleep(max(0.0, t_recorded_s - perf_counter()))
                self.send(event)
            record.t_send = watch.t_active_s = perf_counter()
            self.send(events[-1])
            record.t_uploaded = self.t_sent_s
            self.read(on_message, watch)
        except OSError as e:  # RequestTimeout, a closed connection, ssl.SSLError
            kind = ErrorKind.TIMEOUT if isinstance(e, RequestTimeout) else ErrorKind.TRANSPORT
            record.fail(kind, f"{type(e).__name__}: {e}")
        except (BadFrame, LocalProtocolError, RemoteProtocolError) as e:  # a frame that breaks the protocol
            record.fail(ErrorKind.BAD_STREAM, f"WebSocket: {e}")
        finally:
            watchdog.end(watch)
        return finish(record, t_done or perf_counter())

    def close(self) -> None:
        """Say goodbye (a close frame) and close the connection."""
        with contextlib.suppress(Exception):  # closed already, or wsproto's state allows no close: closed below
            self.conn.sendall(self._ws.send(CloseConnection(code=1000)))
        self.conn.close()


class Opener:
    """Opens a user's WebSockets to its host (`host`: http:// or https://, the scheme of the socket: ws or wss, TLS with
    `context`): each upgrade request with the user's fixed `headers` (auth included), the headers `auth` computes for
    it (SigV4, an OAuth bearer token), and its own; `connect_timeout_s` bounds the connect and the handshake;
    `next_send_s`: the process's next send due (`WebSocket`)."""

    def __init__(
        self,
        host: str,
        headers: Mapping[str, str],
        auth: RequestAuth | None,
        context: ssl.SSLContext | None,
        connect_timeout_s: float,
        next_send_s: NextSend = pump.no_sends,
    ) -> None:
        self.host = host.rstrip("/")
        self.next_send_s = next_send_s
        self.headers = {name: value for name, value in headers.items() if name.lower() != "content-type"}
        self.auth, self.context, self.connect_timeout_s = auth, context, connect_timeout_s

    def open(self, path: str, headers: Mapping[str, str]) -> WebSocket:
        """A WebSocket to `path` (and query) of the host; what connecting or the handshake raised (`HandshakeRefused`:
        the server's HTTP answer)."""
        url = self.host + path
        computed = {} if self.auth is None else self.auth.headers("GET", url, b"")
        sent = {**self.headers, **computed, **headers}
        return WebSocket(url, sent, self.context, self.connect_timeout_s, self.next_send_s)
