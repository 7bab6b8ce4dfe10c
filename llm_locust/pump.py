"""One greenlet per process reads every streaming response body: epoll over all of them.

Reading a stream from its own greenlet costs, per token event, a libev watcher start/stop, two
greenlet switches and a wake-up through the hub — about half of the client's CPU per event
(profile in benchmarks/RESULTS.md). Here each request's greenlet hands its connection to the
process's `StreamPump` and sleeps until the response is complete. The pump's greenlet waits on
one epoll descriptor holding every streaming socket; when it wakes it reads each ready socket
once (non-blocking `recvmsg` into one buffer, with the kernel's receive time) and hands each
de-chunked piece of body to the request's `on_body` callback, in that greenlet, without
switching. A chunked body's data chunks are taken off in Python (`llm_locust.chunked`); the
response's HTTP parser reads everything else (and the whole body when it is not chunked).

Only for plain-TCP sockets on Linux (`available`); TLS connections keep `arrival.body_chunks`.
"""

from __future__ import annotations

import contextlib
import socket
from collections.abc import Callable
from time import perf_counter
from typing import Any

import gevent
from gevent.hub import Waiter, get_hub
from gevent.monkey import get_original
from geventhttpclient._parser import HTTPParseError
from geventhttpclient.response import HTTPConnectionClosed

from llm_locust.arrival import CMSG_BYTES, KERNEL_TIMESTAMPS, READ_BYTES, SO_TIMESTAMPNS, kernel_arrival
from llm_locust.chunked import ChunkedBody
from llm_locust.timeouts import Watch

BodyCallback = Callable[[bytes | bytearray, float], bool]
"""Called with each piece of body bytes (from the parser: a bytearray of its own) and its arrival
time (perf_counter s); returns True once it needs no more bytes (the rest of the body is still
read, for the connection's reuse)."""

try:  # gevent's patched `select` has no epoll
    _epoll, _EPOLLIN = get_original("select", ["epoll", "EPOLLIN"])
except AttributeError:  # not Linux
    _epoll = _EPOLLIN = None
_MAX_EVENTS = 1024


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
        and not hasattr(sock, "getpeercert")
        and hasattr(sock, "_sock")
    )


class _Stream:
    """One response being read by the pump."""

    __slots__ = ("chunks", "done", "error", "fd", "on_body", "raw", "recvmsg_into", "t", "waiter", "watch")

    def __init__(self, raw: Any, on_body: BodyCallback, watch: Watch) -> None:
        self.raw = raw
        self.on_body = on_body
        self.watch = watch
        self.recvmsg_into = raw._sock._sock.recvmsg_into  # the non-blocking socket under gevent's
        self.fd = raw._sock.fileno()
        self.done = False  # on_body needs no more bytes
        self.error: BaseException | None = None
        self.waiter = Waiter()
        self.t = 0.0  # arrival time of the read being parsed
        raw._on_body = self.body  # the parser calls `_on_body` by name: its pieces come here
        # the data chunks are de-framed here when the parser stands at a chunk boundary (see chunked.py)
        at_boundary = _is_chunked(raw) and raw.get_remaining_content_length() == 0
        self.chunks = ChunkedBody() if at_boundary and not raw.message_complete else None

    def body(self, piece: bytearray) -> None:
        """The parser's body callback (instead of the response's buffer): one de-chunked piece of
        the read arrived at `self.t`. Must return a false value (a true one is a parse error)."""
        if not self.done:
            self.done = self.on_body(piece, self.t)


class StreamPump:
    """Reads the bodies of many streaming responses from one greenlet (see the module doc)."""

    def __init__(self) -> None:
        self._hub = get_hub()
        self._epoll = _epoll()
        self._watcher = self._hub.loop.io(self._epoll.fileno(), 1)
        self._streams: dict[int, _Stream] = {}
        buffer = bytearray(READ_BYTES)  # every read lands here, is parsed at once, then overwritten
        self._buffers, self._view = [buffer], memoryview(buffer)
        self._greenlet: gevent.Greenlet | None = None
        self.rounds = 0  # wake-ups of the pump (one reads every ready socket)
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
        raw._sock.setsockopt(socket.SOL_SOCKET, SO_TIMESTAMPNS, 1)
        stream = _Stream(raw, on_body, watch)
        stream.done = done
        self._epoll.register(stream.fd, _EPOLLIN)
        self._streams[stream.fd] = stream
        if self._greenlet is None:
            self._greenlet = gevent.spawn(self._run)
        try:
            stream.waiter.get()
        finally:
            self._forget(stream)
            del raw._on_body  # raw -> stream.body -> stream -> raw: a cycle only the GC would free
        if stream.error is not None:
            raise stream.error

    def _forget(self, stream: _Stream) -> None:
        if self._streams.get(stream.fd) is stream:
            del self._streams[stream.fd]
            with contextlib.suppress(OSError):  # closed already (the kernel dropped it): nothing to undo
                self._epoll.unregister(stream.fd)

    def _run(self) -> None:
        wait, watcher, poll, streams = self._hub.wait, self._watcher, self._epoll.poll, self._streams
        try:
            while streams:
                wait(watcher)
                self.rounds += 1
                for fd, _mask in poll(0, _MAX_EVENTS):
                    stream = streams.get(fd)
                    if stream is not None:
                        self._readable(stream)
        finally:
            self._greenlet = None

    def _readable(self, stream: _Stream) -> None:
        """Read what `stream`'s socket holds once; finish the stream when its response is over."""
        try:
            size, ancillary, _flags, _address = stream.recvmsg_into(self._buffers, CMSG_BYTES)
        except BlockingIOError:
            return
        except BaseException as e:
            self._end(stream, e)
            return
        self.reads += 1
        stream.t = t = kernel_arrival(ancillary, perf_counter())
        stream.watch.t_active_s = t
        raw = stream.raw
        data = bytes(self._view[:size])  # no 64 KiB allocation per read: the heap stays compact
        try:
            chunks = stream.chunks
            if chunks is not None and size:
                data = chunks.feed(data, stream.body)  # the data chunks: to stream.body
                if data is None:
                    return
                stream.chunks = None  # the last chunk, or bytes it did not expect: the parser's from here on
            raw.feed(data)  # calls stream.body per piece of body; b"": end of input, which completes a body
            # delimited by the close
        except HTTPParseError as e:
            if size:
                self._end(stream, e)
                return
        except BaseException as e:
            self._end(stream, e)
            return
        if raw.message_complete:  # the parser has handed the socket back to the pool
            self._end(stream, None)
        elif not size:
            self._end(stream, HTTPConnectionClosed("connection closed before the end of the response"))

    def _end(self, stream: _Stream, error: BaseException | None) -> None:
        """Stop reading `stream`; wake its request's greenlet (raising `error` there, if any)."""
        stream.error = error
        self._forget(stream)
        self._hub.loop.run_callback(stream.waiter.switch, None)


_pump: StreamPump | None = None


def pump() -> StreamPump:
    """This process's pump (created on first use, in the hub's thread)."""
    global _pump
    if _pump is None or _pump._hub is not get_hub():
        _pump = StreamPump()
    return _pump
