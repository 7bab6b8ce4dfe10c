"""The fast client's TLS connection: TLS decrypted in memory over the raw TCP socket, read with kernel receive times.

An `ssl.SSLSocket` reads and decrypts in one call, so the time a piece of plaintext arrived is the time the call
returned, and only its own greenlet can read it. Here, as in asyncio's SSL transport, the TLS state is an
`ssl.SSLObject` between two `ssl.MemoryBIO`s: the ciphertext is read from the raw TCP socket like any plain
connection's bytes — by `recvmsg` with the kernel's receive time (`SO_TIMESTAMPNS`; `patches.StampedSocket`), by
the pump for a response body — and handed to `decrypt`, whose plaintext keeps the time of the read it came from.

`TLSConnection` is what geventhttpclient holds as its socket (`patches.tls_connect_socket` makes it, after the TCP
connect and a proxy's CONNECT tunnel, on the same raw socket): `sendall`/`send`, `recv`/`recv_into`, `close`,
`fileno`, `settimeout`, `getpeercert`. The handshake, with the certificate and host-name checks of the process's
context (`tls.client_context`), is done in `__init__`, before any byte of a request; its failures are the same
`ssl` exceptions an `SSLSocket` raises.

The end of the stream, as `SSLSocket` with `suppress_ragged_eofs` reports it to its reader: `recv` returns b""
at a close_notify and at a TCP close without one. The pump asks `decrypt`, which says which it was
(close_notify, or a TCP close without one — a truncated stream) after the plaintext before it: the HTTP parser
decides whether the response was complete, and if not the request fails with that reason; a TLS alert or a bad
record is an `ssl.SSLError`.
"""

from __future__ import annotations

import ssl
from time import perf_counter
from typing import Any

from llm_locust.transport.byte_arrival import READ_BYTES

CLOSE_NOTIFY = "the server ended TLS (close_notify) before the end of the response"
RAGGED_EOF = "the connection closed without TLS close_notify before the end of the response (truncated)"


class TLSConnection:
    """A TLS client connection over the raw TCP socket `raw` (a gevent socket, connected), decrypted in memory.

    `t_arrival_s`: perf_counter s, the arrival time of the raw read that completed the plaintext `recv` returned
    last (the kernel's receive time where the raw socket keeps it). `tls_handshake_s`: how long the handshake
    took, seconds: from the ClientHello's write to the arrival of the server's last handshake message.
    """

    __slots__ = ("_eof", "_incoming", "_outgoing", "raw", "t_arrival_s", "tls", "tls_handshake_s")

    def __init__(self, raw: Any, context: ssl.SSLContext, server_hostname: str) -> None:
        self.raw = raw
        self._incoming, self._outgoing = ssl.MemoryBIO(), ssl.MemoryBIO()
        self.tls = context.wrap_bio(self._incoming, self._outgoing, server_hostname=server_hostname)
        self.t_arrival_s = 0.0
        self._eof = False  # the raw socket has reached its end (written into the incoming BIO)
        t_start = perf_counter()
        while True:
            try:
                self.tls.do_handshake()
                break
            except ssl.SSLWantReadError:
                self._flush()
                if self._eof:
                    raise ssl.SSLEOFError("the server closed the connection during the TLS handshake") from None
                self._fill()
        self._flush()
        # to the arrival (kernel receive time) of the server's last handshake message: the client's own wait to be
        # scheduled after it, and its checking of the certificate, are not the server's or the network's time
        t_end = self.t_arrival_s if self.t_arrival_s > t_start else perf_counter()
        self.tls_handshake_s = t_end - t_start

    @property
    def connect_s(self) -> float:
        """How long the TCP connect (and a proxy's CONNECT tunnel) took, seconds (`patches.StampedSocket`)."""
        return self.raw.connect_s

    @property
    def requests(self) -> int:
        """How many requests have taken this connection from the pool (1: the first)."""
        return self.raw.requests

    @property
    def t_sent_s(self) -> float:
        """When the last encrypted bytes were handed to the kernel (`patches.StampedSocket`), perf_counter s."""
        return self.raw.t_sent_s

    @requests.setter
    def requests(self, count: int) -> None:
        self.raw.requests = count

    # -- what geventhttpclient calls --
    def sendall(self, data: bytes | bytearray | memoryview) -> None:
        """Encrypt and send all of `data`."""
        view = memoryview(data)
        while view:
            view = view[self.tls.write(view) :]
            self._flush()

    def send(self, data: bytes | bytearray | memoryview) -> int:
        """Encrypt and send all of `data`; returns its length."""
        self.sendall(data)
        return len(data)

    def recv(self, bufsize: int) -> bytes:
        """Up to `bufsize` bytes of plaintext, waiting cooperatively for them; b"" at the end of the stream
        (close_notify, or a TCP close without one)."""
        while True:
            try:
                data = self.tls.read(bufsize)
                self._flush()  # a post-handshake message may want an answer (a key update)
                return data
            except ssl.SSLWantReadError:
                self._flush()
                if self._eof:
                    return b""
                self._fill()
            except ssl.SSLEOFError:
                return b""

    def recv_into(self, buffer: Any, nbytes: int = 0) -> int:
        """`recv` into `buffer`; returns the number of bytes."""
        view = memoryview(buffer)
        data = self.recv(nbytes or len(view))
        view[: len(data)] = data
        return len(data)

    def close(self) -> None:
        self.raw.close()

    def fileno(self) -> int:
        return self.raw.fileno()

    def settimeout(self, seconds: float | None) -> None:
        self.raw.settimeout(seconds)

    def gettimeout(self) -> float | None:
        return self.raw.gettimeout()

    def getpeercert(self, binary_form: bool = False) -> Any:
        return self.tls.getpeercert(binary_form)

    def setsockopt(self, *args: Any) -> None:
        self.raw.setsockopt(*args)

    # -- the pump's side --
    def decrypt(self, data: bytes) -> tuple[bytes, str | None]:
        """The plaintext that `data` (the next bytes read from the raw socket; b"": its end) completes (b"" when
        none: a partial record, a post-handshake message), and None while the TLS stream goes on, else how it
        ended (`CLOSE_NOTIFY`, `RAGGED_EOF`: after that plaintext). Raises `ssl.SSLError` for a TLS alert or a
        bad record."""
        if data:
            self._incoming.write(data)
        else:
            self._incoming.write_eof()
            self._eof = True
        return self.take_plaintext()

    def take_plaintext(self) -> tuple[bytes, str | None]:
        """All the plaintext the bytes read so far hold, and how the stream ended (as `decrypt`)."""
        pieces, end = [], None
        tls, incoming = self.tls, self._incoming
        while True:
            try:
                piece = tls.read(READ_BYTES)
            except ssl.SSLWantReadError:  # a partial record: the rest comes with a later read
                break
            except ssl.SSLEOFError:
                end = RAGGED_EOF
                break
            if not piece:
                end = CLOSE_NOTIFY
                break
            pieces.append(piece)
            if not (incoming.pending or tls.pending() or self._eof):  # all read: spare the failing read (a raise)
                break
        if self._outgoing.pending and end is None:  # a post-handshake message wants an answer (a key update)
            self._flush()
        return (pieces[0] if len(pieces) == 1 else b"".join(pieces)), end

    # -- the raw socket --
    def _fill(self) -> None:
        """Read what is there on the raw socket (waiting cooperatively) into the incoming BIO."""
        data = self.raw.recv(READ_BYTES)
        self.t_arrival_s = getattr(self.raw, "t_arrival_s", 0.0) or perf_counter()
        if data:
            self._incoming.write(data)
        else:
            self._incoming.write_eof()
            self._eof = True

    def _flush(self) -> None:
        """Send what TLS has to send (handshake messages, records, answers to post-handshake messages)."""
        if self._outgoing.pending:
            self.raw.sendall(self._outgoing.read())
