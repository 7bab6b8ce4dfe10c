"""One greenlet per process reads every streaming response body: epoll over all of them.

Reading a stream from its own greenlet costs, per token event, a libev watcher start/stop, two
greenlet switches and a wake-up through the hub — about half of the client's CPU per event
(profile in benchmarks/RESULTS.md). Here each request's greenlet hands its connection to the
process's `StreamPump` and sleeps until the response is complete. The pump's greenlet waits on
one epoll descriptor holding every streaming socket; when it wakes it reads each ready socket
once (non-blocking `recvmsg` into one buffer, with the kernel's receive time) and hands each
de-chunked piece of body to the request's `on_body` callback, in that greenlet, without
switching. A chunked body's data chunks are taken off in Python (`llm_locust.transport.chunked`); the
response's HTTP parser reads everything else (and the whole body when it is not chunked).

Reads first, parsing after. A token's time is the kernel's receive time of its read, exact
however late the read is parsed, as long as the read comes before the stream's next token
arrives (else the kernel hands both over in one read: one time for two tokens). So the pump
reads every ready socket (~5 µs each, mostly the system call), queues what it read, and parses
the queue a few reads at a time, looking for ready sockets again in between: a socket waits for
at most a few parses, not for a whole round of parsing, and the timing stays exact until the
process runs out of CPU — not from ~70 % of it, as when each read was parsed at once.

Sends come first: in an open loop the pump's turn ends by the next send due (`next_send_s`, handed in by the wiring:
`load.due_sends`) — the parse under way
finishes, the rest waits, and so do the reads — so that the user sends on time; a turn that would begin when a send is
due already yields at once (data not read yet keeps its kernel receive time).

TLS connections alike (`tls_memory.TLSConnection`): the pump reads their raw TCP socket the same way, and
decrypts each read in memory when it parses it — each decrypted piece keeps the kernel time of the read it
came from (a record split over two reads: the time of the second). A read that completes no record hands
nothing on; a close_notify, a TCP close without one, a TLS alert end the stream as the end of input (the HTTP
parser decides whether the response was complete; if not, the request fails with the reason). Plain streams
take no extra step per read: each stream's `parse` is chosen once. Linux only (`available`); elsewhere
`byte_arrival.body_chunks` reads the body from the request's greenlet.
"""

from __future__ import annotations

import contextlib
from collections import deque
from collections.abc import Callable
from time import perf_counter
from typing import Any

import gevent
from gevent.hub import Waiter, get_hub
from gevent.monkey import get_original
from geventhttpclient._parser import HTTPParseError
from geventhttpclient.response import HTTPConnectionClosed

from llm_locust.transport.byte_arrival import READ_BYTES
from llm_locust.transport.chunked import ChunkedBody
from llm_locust.transport.kernel_time import CMSG_BYTES, KERNEL_TIMESTAMPS, kernel_arrival
from llm_locust.transport.request import NextSend
from llm_locust.transport.timeouts import Watch
from llm_locust.transport.tls_memory import TLSConnection

BodyCallback = Callable[[bytes | bytearray, float], bool]
"""Called with each piece of body bytes (from the parser: a bytearray of its own) and its arrival
time (perf_counter s); returns True once it needs no more bytes (the rest of the body is still
read, for the connection's reuse)."""

try:  # gevent's patched `select` has no epoll
    _epoll, _EPOLLIN = get_original("select", ["epoll", "EPOLLIN"])
except AttributeError:  # not Linux
    _epoll = _EPOLLIN = None
_MAX_EVENTS = 1024
_PARSE_SLICE = 16  # reads parsed between two looks for ready sockets
_TURN_S = 0.002  # longest the pump parses before the other greenlets get a turn, seconds
_YIELD_S = 0.0001  # a timer, not sleep(0): the loop polls (requests waiting for their head get their turn)


def turn_end(now_s: float, turn_s: float, next_send_s: float | None) -> float:
    """When a pump turn starting at `now_s` ends (perf_counter s): `turn_s` later, or at `next_send_s` (the next
    send due, `request.NextSend`; None: none), if sooner — at once when that send is due already and
    its user has not run yet."""
    return now_s + turn_s if next_send_s is None else min(now_s + turn_s, next_send_s)


def _is_chunked(raw: Any) -> bool:
    """True when the response's body has the chunked transfer coding."""
    coding = raw.get("transfer-encoding") or ""
    return (coding if isinstance(coding, str) else ",".join(coding)).strip().lower() == "chunked"


def available(raw: Any) -> bool:
    """True when the body of `raw` (a geventhttpclient response) can be read by the pump."""
    sock = getattr(raw, "_sock", None)
    return (
        KERNEL_TIMESTAMPS
        and _epoll is not None
        and sock is not None
        and (isinstance(sock, TLSConnection) or (hasattr(sock, "_sock") and not hasattr(sock, "getpeercert")))
    )


def reads_sockets() -> bool:
    """True when the pump can read a connection of its own framing (`StreamPump.read_socket`): epoll and kernel
    receive times (Linux)."""
    return KERNEL_TIMESTAMPS and _epoll is not None


class _Stream:
    """One response being read by the pump."""

    __slots__ = (
        "chunks", "closed", "done", "error", "fd", "on_body", "parse", "raw", "reading", "recvmsg_into", "t", "tls",
        "waiter", "watch",
    )  # fmt: skip

    def __init__(self, raw: Any, on_body: BodyCallback, watch: Watch, parse: Callable[..., None]) -> None:
        self.raw = raw
        self.on_body = on_body
        self.watch = watch
        self.parse = parse  # the pump's parse of one read of this stream (decrypting first for TLS)
        sock = raw._sock
        self.tls: TLSConnection | None = sock if isinstance(sock, TLSConnection) else None
        tcp = sock.raw if self.tls is not None else sock
        self.recvmsg_into = tcp._sock.recvmsg_into  # the non-blocking socket under gevent's
        self.fd = tcp.fileno()
        self.closed = "connection closed before the end of the response"  # the end of input, if premature
        self.done = False  # on_body needs no more bytes
        self.error: BaseException | None = None
        self.waiter = Waiter()
        self.t = 0.0  # arrival time of the read being parsed
        self.reading = True  # False after the end of input or a failed read
        raw._on_body = self.body  # the parser calls `_on_body` by name: its pieces come here
        # the data chunks are de-framed here when the parser stands at a chunk boundary (see chunked.py)
        at_boundary = _is_chunked(raw) and raw.get_remaining_content_length() == 0
        self.chunks = ChunkedBody() if at_boundary and not raw.message_complete else None

    def body(self, piece: bytearray) -> None:
        """The parser's body callback (instead of the response's buffer): one de-chunked piece of
        the read arrived at `self.t`. Must return a false value (a true one is a parse error)."""
        if not self.done:
            self.done = self.on_body(piece, self.t)


class _SocketStream:
    """A connection read by the pump as a byte stream of its own framing, not an HTTP body (`StreamPump.read_socket`: a
    WebSocket's frames): each read's bytes (decrypted, over TLS) go to `on_bytes` until it has what it waits for."""

    __slots__ = ("closed", "error", "fd", "on_body", "parse", "reading", "recvmsg_into", "tls", "waiter", "watch")

    def __init__(self, conn: Any, on_bytes: BodyCallback, watch: Watch, parse: Callable[..., None]) -> None:
        self.on_body = on_bytes
        self.watch = watch
        self.parse = parse
        self.tls: TLSConnection | None = conn if isinstance(conn, TLSConnection) else None
        tcp = conn.raw if self.tls is not None else conn
        self.recvmsg_into = tcp._sock.recvmsg_into
        self.fd = tcp.fileno()
        self.closed = "the server closed the connection"  # the end of input, said as the stream's error
        self.error: BaseException | None = None
        self.waiter = Waiter()
        self.reading = True


class StreamPump:
    """Reads the bodies of many streaming responses from one greenlet (see the module doc)."""

    def __init__(self, next_send_s: NextSend) -> None:
        self._hub = get_hub()
        self.next_send_s = next_send_s  # the process's next send due, by which a turn ends
        self._epoll = _epoll()
        self._watcher = self._hub.loop.io(self._epoll.fileno(), 1)
        self._streams: dict[int, _Stream] = {}
        self._backlog: deque[tuple[_Stream, bytes, float, BaseException | None]] = deque()  # read, not parsed
        buffer = bytearray(READ_BYTES)  # every read lands here, is copied to the backlog, then overwritten
        self._buffers, self._view = [buffer], memoryview(buffer)
        self._greenlet: gevent.Greenlet | None = None
        self.reads = 0  # socket reads

    @property
    def streams(self) -> int:
        """Responses being read now."""
        return len(self._streams)

    def read(self, raw: Any, on_body: BodyCallback, watch: Watch, done: bool = False) -> None:
        """Read the rest of `raw`'s body (its headers are read), calling `on_body` in the pump's
        greenlet for each piece (none when `done`: the rest is read for the connection's reuse);
        return when the response is complete.

        Raises what reading raised: socket errors, `HTTPParseError`, `HTTPConnectionClosed` (the
        server closed first), an exception of `on_body`; and what is thrown into the waiting
        greenlet (the watchdog's `RequestTimeout`, a stopping user's `GreenletExit`).
        """
        tls = isinstance(raw._sock, TLSConnection)
        # its socket keeps kernel receive times (patches.StampedSocket)
        stream = _Stream(raw, on_body, watch, self._parse_tls if tls else self._parse)
        stream.done = done
        self._epoll.register(stream.fd, _EPOLLIN)
        self._streams[stream.fd] = stream
        if self._greenlet is None:
            self._greenlet = gevent.spawn(self._run)
        try:
            if stream.tls is not None:  # plaintext decrypted, or records read, with the head: parsed here and now
                self._parse_tls(stream, None, stream.tls.t_arrival_s or perf_counter(), None)
            stream.waiter.get()
        finally:
            self._forget(stream)
            del raw._on_body  # raw -> stream.body -> stream -> raw: a cycle only the GC would free
        if stream.error is not None:
            raise stream.error

    def read_socket(self, conn: Any, on_bytes: BodyCallback, watch: Watch) -> None:
        """Read `conn` (a connected `patches.StampedSocket`, or a `TLSConnection` over one) as bytes of its own framing,
        not an HTTP response (a WebSocket's frames): each read's bytes — decrypted, over TLS; what TLS had decrypted
        already first — go to `on_bytes` with their kernel receive time, in the pump's greenlet, until it returns True;
        return then, the connection open and no longer read (what arrives meanwhile waits in the kernel with its
        receive time for the next call).

        Raises `ConnectionError` (the server closed first: `ConnectionResetError`), what reading raised (socket and
        `ssl` errors), an exception of `on_bytes`, and what is thrown into the waiting greenlet (the watchdog's
        `RequestTimeout`, a stopping user's `GreenletExit`)."""
        stream = _SocketStream(conn, on_bytes, watch, self._parse_socket)
        self._epoll.register(stream.fd, _EPOLLIN)
        self._streams[stream.fd] = stream  # type: ignore[assignment]
        if self._greenlet is None:
            self._greenlet = gevent.spawn(self._run)
        try:
            if stream.tls is not None:
                self._parse_socket(stream, None, stream.tls.t_arrival_s or perf_counter(), None)
            stream.waiter.get()
        finally:
            self._forget(stream)  # type: ignore[arg-type]
        if stream.error is not None:
            raise stream.error

    def _parse_socket(self, stream: _SocketStream, data: bytes | None, t: float, error: BaseException | None) -> None:
        """Hand one read of a `read_socket` stream (arrived at `t`; empty: the end of input; None: what TLS decrypted
        before; `error`: the read failed) to its `on_bytes`, decrypted first over TLS; end it once that has what it
        waits for, or at the end of input."""
        if self._streams.get(stream.fd) is not stream:  # its caller ended meanwhile (a timeout, a stop)
            return
        end_of_input = data == b""
        if error is None and stream.tls is not None and not end_of_input:
            try:
                data, end = stream.tls.take_plaintext() if data is None else stream.tls.decrypt(data)
            except OSError as e:  # ssl.SSLError: a TLS alert, a bad record
                error = e
            else:
                if end is not None:  # close_notify, or a TCP close without it
                    self._stop_reading(stream)  # type: ignore[arg-type]
                    stream.closed, end_of_input = end, True
        if error is None and data:
            try:
                if stream.on_body(data, t):
                    self._end(stream, None)  # type: ignore[arg-type]
                    return
            except BaseException as e:
                error = e
        if error is None and end_of_input:
            error = ConnectionResetError(stream.closed)
        if error is not None:
            self._end(stream, error)  # type: ignore[arg-type]

    def _forget(self, stream: _Stream) -> None:
        if self._streams.get(stream.fd) is stream:
            del self._streams[stream.fd]
            self._stop_reading(stream)

    def _run(self) -> None:
        """Reads first, parsing after: each turn reads every ready socket, then parses what was
        read a few reads at a time, reading the sockets that became ready in between."""
        wait, watcher, backlog = self._hub.wait, self._watcher, self._backlog
        try:
            while self._streams or backlog:
                if not backlog:
                    wait(watcher)  # nothing left to parse: sleep until a socket is readable
                now_s = perf_counter()
                turn_end_s = turn_end(now_s, _TURN_S, self.next_send_s(now_s))
                if turn_end_s <= now_s:  # a user's send is due: it goes first (unread data keeps its kernel time)
                    gevent.sleep(_YIELD_S)
                    continue
                self._read_ready(turn_end_s)
                while backlog and perf_counter() < turn_end_s:
                    for _ in range(min(_PARSE_SLICE, len(backlog))):
                        entry = backlog.popleft()
                        entry[0].parse(*entry)
                        if perf_counter() >= turn_end_s:
                            break
                    self._read_ready(turn_end_s)
                if backlog:  # a long turn: let the other greenlets run, then go on
                    gevent.sleep(_YIELD_S)
        finally:
            self._greenlet = None

    def _read_ready(self, until_s: float) -> None:
        """Read each ready socket once into the backlog, with the kernel's receive time; stop at perf_counter instant
        `until_s` (a send due: the sockets not read are ready again at the next look)."""
        streams, backlog = self._streams, self._backlog
        for fd, _mask in self._epoll.poll(0, _MAX_EVENTS):
            if perf_counter() >= until_s:
                break
            stream = streams.get(fd)
            if stream is None or not stream.reading:
                continue
            try:
                size, ancillary, _flags, _address = stream.recvmsg_into(self._buffers, CMSG_BYTES)
            except BlockingIOError:
                continue
            except BaseException as e:
                self._stop_reading(stream)
                backlog.append((stream, b"", perf_counter(), e))
                continue
            self.reads += 1
            t = kernel_arrival(ancillary, perf_counter())
            stream.watch.t_active_s = t
            if not size:  # the server closed: the end of input
                self._stop_reading(stream)
            backlog.append((stream, bytes(self._view[:size]), t, None))  # one copy: the buffer is reused

    def _stop_reading(self, stream: _Stream) -> None:
        """No more reads of `stream` (end of input or an error; epoll would report it forever)."""
        stream.reading = False
        with contextlib.suppress(OSError):  # unregistered already, or closed (the kernel dropped it)
            self._epoll.unregister(stream.fd)

    def _parse(self, stream: _Stream, data: bytes, t: float, error: BaseException | None) -> None:
        """Parse one read of `stream` (arrived at `t`; empty: the end of input; `error`: the read
        failed); finish the stream when its response is over."""
        if self._streams.get(stream.fd) is not stream:  # its request ended meanwhile (a timeout, a stop)
            return
        if error is not None:
            self._end(stream, error)
            return
        stream.t = t
        raw = stream.raw
        end_of_input = not data
        try:
            chunks = stream.chunks
            if chunks is not None and data:
                data = chunks.feed(data, stream.body)  # the data chunks: to stream.body
                if data is None:
                    return
                stream.chunks = None  # the last chunk, or bytes it did not expect: the parser's from here on
            raw.feed(data)  # calls stream.body per piece of body; b"": end of input, which completes a body
            # delimited by the close
        except HTTPParseError as e:
            if not end_of_input:  # at the end of input: a truncated body, said just below
                self._end(stream, e)
                return
        except BaseException as e:
            self._end(stream, e)
            return
        if raw.message_complete:  # the parser has handed the socket back to the pool
            self._end(stream, None)
        elif end_of_input:
            self._end(stream, HTTPConnectionClosed(stream.closed))

    def _parse_tls(self, stream: _Stream, data: bytes | None, t: float, error: BaseException | None) -> None:
        """`_parse` for a TLS stream: `data` is ciphertext (None: what was read before, with the head), decrypted
        first; its plaintext is parsed as arrived at `t`, then the end of the TLS stream if it came."""
        tls = stream.tls
        if error is not None or tls is None or self._streams.get(stream.fd) is not stream:
            self._parse(stream, b"", t, error)
            return
        try:
            plain, end = tls.take_plaintext() if data is None else tls.decrypt(data)
        except OSError as e:  # ssl.SSLError: a TLS alert, a bad record
            self._stop_reading(stream)
            self._parse(stream, b"", t, e)
            return
        if plain:
            self._parse(stream, plain, t, None)
        if end is not None:
            self._stop_reading(stream)
            stream.closed = end
            self._parse(stream, b"", t, None)

    def _end(self, stream: _Stream, error: BaseException | None) -> None:
        """Stop reading `stream`; wake its request's greenlet (raising `error` there, if any)."""
        stream.error = error
        self._forget(stream)
        self._hub.loop.run_callback(stream.waiter.switch, None)


_pump: StreamPump | None = None
"""The pump of this process's gevent hub: one per hub by design (one poller reads every stream); kept here
because `FastTransport.send` runs in each user's greenlet with nothing else shared to hang it on."""


def no_sends(_now_s: float) -> float | None:
    """No send is ever due (a process whose users send in a closed loop only, e.g. a test's)."""
    return None


def pump(next_send_s: NextSend = no_sends) -> StreamPump:
    """This process's pump (created on first use, in the hub's thread), its turns ending by `next_send_s` (the
    process's sends: one for every transport of the process)."""
    global _pump
    if _pump is None or _pump._hub is not get_hub():
        _pump = StreamPump(next_send_s)
    else:
        _pump.next_send_s = next_send_s
    return _pump
