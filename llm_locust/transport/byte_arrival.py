"""A streamed response body as it arrives: de-chunked bytes, each piece with its arrival time.

The one place that touches the connection under Locust's FastHttp response (geventhttpclient's
`HTTPSocketPoolResponse`: its socket, its HTTP parser `feed`, its body buffer). Everything
above it sees `(bytes, t)` pairs, `t` in `time.perf_counter()` seconds.

Used where the pump cannot read (not Linux): the request's own greenlet reads its body. On Linux the
pump (`transport.pump`) reads every body, plain TCP and TLS alike, with the kernel's receive times.

Arrival time: where the kernel gives it (`SO_TIMESTAMPNS`, on a plain socket), the receive time of the
last TCP segment in the read, so a busy client does not delay the timestamps; otherwise — and for a
TLS connection (`tls_memory.TLSConnection`, read with `recv`) — the time the read returned. Each read
takes all that is there (never waiting to fill a buffer: Locust's `iter_content` waits for 1 KiB).
"""

from __future__ import annotations

import socket
from collections.abc import Callable, Iterator
from time import perf_counter
from typing import Any

from gevent.socket import wait_read
from geventhttpclient._parser import HTTPParseError
from geventhttpclient.response import HTTPConnectionClosed

from llm_locust.transport.kernel_time import CMSG_BYTES, KERNEL_TIMESTAMPS, SO_TIMESTAMPNS, kernel_arrival

READ_BYTES = 65536


def body_chunks(raw: Any, t_head_s: float | None) -> Iterator[tuple[bytes, float]]:
    """Yield the body of `raw` (a geventhttpclient response whose headers are read) as it
    arrives: `(bytes, arrival perf_counter s)`, until the response is complete; what came with the headers arrived
    with them, at `t_head_s` (the arrival of the read that ended the head; now when None).

    Raises HTTPConnectionClosed if the server closes the connection first; socket errors
    (and a `RequestTimeout` thrown in by the watchdog) propagate. The caller releases `raw`.
    """
    body = raw._body_buffer  # filled by raw.feed() (llhttp removes the chunked framing)
    if body:  # arrived together with the headers
        yield take_bytes(body), t_head_s or perf_counter()
    if raw.message_complete:  # all of it came with the headers; the connection is released
        return
    read = _reader(raw._sock)
    while not raw.message_complete:
        data, t = read()
        try:
            raw.feed(data)  # b"": end of input, which completes a body delimited by the close
        except HTTPParseError:  # at end of input: a truncated body, reported just below
            if data:
                raise
        if body:
            yield take_bytes(body), t
        if not data and not raw.message_complete:
            raise HTTPConnectionClosed("connection closed before the end of the response")


def take_bytes(buffer: bytearray) -> bytes:
    """Empty `buffer`, returning what it held."""
    data = bytes(buffer)
    del buffer[:]
    return data


def _reader(sock: Any) -> Callable[[], tuple[bytes, float]]:
    """A function reading what is there on `sock` (waiting cooperatively) -> (bytes, arrival t)."""
    if not KERNEL_TIMESTAMPS or hasattr(sock, "getpeercert"):  # TLS sockets have no recvmsg

        def read_plain() -> tuple[bytes, float]:
            data = sock.recv(READ_BYTES)
            return data, perf_counter()

        return read_plain

    sock.setsockopt(socket.SOL_SOCKET, SO_TIMESTAMPNS, 1)
    recvmsg = sock.recvmsg
    wait_readable = _waiter(sock)

    def read_stamped() -> tuple[bytes, float]:
        wait_readable()  # usually nothing is there yet: wait first, saving a failing read per event
        data, ancillary, _flags, _address = recvmsg(READ_BYTES, CMSG_BYTES)
        return data, kernel_arrival(ancillary, perf_counter())

    return read_stamped


def _waiter(sock: Any) -> Callable[[], None]:
    """A function waiting cooperatively until `sock` is readable.

    gevent sockets keep one read watcher (`_wait(_read_event)`, what their own `recv` uses);
    the public `wait_read` makes a new watcher per call, measurably slower per token event.
    """
    wait, read_event = getattr(sock, "_wait", None), getattr(sock, "_read_event", None)
    if wait is not None and read_event is not None:
        return lambda: wait(read_event)
    fileno = sock.fileno()
    return lambda: wait_read(fileno)
